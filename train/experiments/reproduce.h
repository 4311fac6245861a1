// `depthgrad reproduce --paper rd-attnres`: the Block AttnRes vs RD-AttnRes comparison.
//
//  parity protocol (default): exactly the reference run (upstream-protocol.md §6): BPE-512 on
//    WikiText-2 train + Tiny Shakespeare, 120k train ids, block_attnres then rd_attnres, 30 AdamW
//    steps each from torch-parity init, evaluation on 32 windows of 64 validation ids, JS from the
//    last training batch. Its numbers are the ones the reference prints on the same data.
//  paired protocol: both arms per seed with the same data order (and, with init identical, the
//    same starting function); per-seed paired differences of validation NLL, wins, the mean
//    difference with a 95% t interval, an exact sign test, and per-layer JS on the validation
//    windows after training (mean and distribution).
// Writes <output>/2608.01075-rd-attnres/<timestamp>/{result.json, metrics.json, report.md,
// report.html, tokenizer.json} atomically. It does not parse command lines (tools/cli does).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/data_parallel.h"
#include "train/evaluation.h"
#include "train/io/json.h"
#include "train/io/run_record.h"

namespace dg {

struct PaperInfo {
  std::string key, arxiv_id, title, url, organization, fidelity;
};
const std::vector<PaperInfo>& known_papers();
const PaperInfo& find_paper(const std::string& key);  // throws listing the known keys

struct ReproduceOptions {
  std::string paper = "rd-attnres";
  std::string protocol = "parity";  // parity | paired
  std::string data_dir;             // resolved
  std::string cache_dir;            // resolved; empty = no cache
  std::string output_dir = "runs/reproductions";
  std::string state_file;           // paired: resume finished (seed, arm) pairs from here
  std::string run_dir;              // where files go; empty: <output_dir>/<arxiv>-<key>/<timestamp>
  std::vector<uint64_t> seeds{42};
  int64_t steps = 30;
  int64_t layers = 2;
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t seq_len = 64;
  int64_t batch = 4;
  int64_t expansion = 3;
  int vocab_size = 512;
  double lr = 6e-4;
  std::string schedule = "constant";  // constant | cosine
  int64_t warmup = 0;
  std::string decay = "all";          // all | matrices
  InitScheme init = InitScheme::parity;
  bool eval_full = false;
  int64_t train_limit = 120000;  // 0 = every train id
  int64_t eval_limit = 8000;     // 0 = every validation id
  int threads = 1;
  bool write_files = true;
  // Paired protocol over MPI ranks (train/data_parallel.h; null = one process): seed i runs on
  // rank i mod N, every rank gets every seed's result (the same bits as one process), and only
  // rank 0 writes files.
  Collectives* world = nullptr;
  // progress: called for every training step of every arm
  std::function<void(const std::string& arm, uint64_t seed, size_t seed_index, size_t seeds, const StepLog&)> on_step;
  std::function<void(const std::string& line)> on_message;  // one-line status messages
};

struct ReproduceOutput {
  std::string run_dir;
  json::Value result;
  std::string table;  // the comparison table as printed
};

ReproduceOutput run_reproduce(const ReproduceOptions& options);

// The default run directory for a paper under output_dir.
std::string default_run_dir(const std::string& output_dir, const std::string& paper_key);

}  // namespace dg
