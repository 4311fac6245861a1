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
// report.html, tokenizer.json} atomically. result.json's "config" is the method arm's RunConfig at
// the first seed (train/run_config.h's mapping; the baseline differs only in model.mode, other
// seeds only in training.seed); its "setup" restates it in the reference's vocabulary (§6.3).
// It does not parse command lines (tools/cli does).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/data_parallel.h"
#include "train/evaluation.h"
#include "train/io/json.h"
#include "train/io/run_record.h"
#include "train/run_config.h"

namespace dg {

struct PaperInfo {
  std::string key, arxiv_id, title, url, organization, fidelity;
};
const std::vector<PaperInfo>& known_papers();
const PaperInfo& find_paper(const std::string& key);  // throws listing the known keys

// The run each protocol starts from before any flag: parity is the reference run (RunConfig{},
// 120,000 train and 8,000 validation ids, 32 evaluation windows); paired is 1000 steps of cosine
// with 5% warm-up, weight decay on matrices only, identical init, every train and validation id
// and a full-split evaluation beside the 32 windows. Throws for another protocol name.
RunConfig protocol_run_config(const std::string& protocol);

// The two arms, in order: the baseline (block_attnres) and the method (rd_attnres).
struct ReproduceArm {
  std::string name;
  ResidualMode mode;
};
const std::vector<ReproduceArm>& reproduce_arms();

// What one arm trains at one seed: `shared` with model.mode = mode and training.seed = seed.
RunConfig arm_run_config(const RunConfig& shared, ResidualMode mode, uint64_t seed);

struct ReproduceOptions {
  std::string paper = "rd-attnres";
  std::string protocol = "parity";  // parity | paired
  // What every arm trains: the model (model.mode is the arm's), the training (training.seed is
  // each of `seeds` in turn) and the data (dataset wikitext-2; model.vocab is the BPE size asked
  // for, then the tokenizer's).
  RunConfig config = protocol_run_config("parity");
  std::vector<uint64_t> seeds{42};
  std::string data_dir;   // resolved
  std::string cache_dir;  // resolved; empty = no cache
  std::string output_dir = "runs/reproductions";
  std::string state_file;  // resume finished (seed, arm) pairs from here
  // Where the arm in training is saved when a stop is requested (train/stop.h) and resumed from:
  // <dir>/seed-<seed>-<arm>.safetensors, removed when the arm is done. Empty: no arm checkpoints.
  std::string arm_checkpoint_dir;
  std::string run_dir;  // where files go; empty: <output_dir>/<arxiv>-<key>/<timestamp>
  int threads = 1;
  bool write_files = true;
  // Paired protocol over MPI ranks (train/data_parallel.h; null = one process): seed i runs on
  // rank i mod N, every rank gets every seed's result (the same bits as one process), and only
  // rank 0 writes files.
  Collectives* world = nullptr;
  // progress: called for every training step of every arm
  std::function<void(const std::string& arm, uint64_t seed, size_t seed_index, size_t seeds,
                     const StepLog&)>
      on_step;
  std::function<void(const std::string& line)> on_message;  // one-line status messages
};

// Throws std::invalid_argument naming what is wrong (paper, protocol, seeds, a config key, a
// dataset other than wikitext-2; over MPI ranks: the parity protocol, a state file, fewer seeds
// than ranks). run_reproduce calls it before any work; so can a caller.
void check_reproduce_options(const ReproduceOptions& options);

// The state file's key: the paper, the protocol, the tokenizer's SHA-256 and the whole run config
// through its one JSON mapping (with the arm's mode and the seed left out: the state records them
// per result). A state file whose key differs is refused, so every setting a RunConfig holds,
// present or future, keeps a state file from mixing runs.
json::Value reproduce_resume_key(const ReproduceOptions& options,
                                 const std::string& tokenizer_sha256);

struct ReproduceOutput {
  std::string run_dir;
  json::Value result;
  std::string table;  // the comparison table as printed
};

ReproduceOutput run_reproduce(const ReproduceOptions& options);

// The default run directory for a paper under output_dir.
std::string default_run_dir(const std::string& output_dir, const std::string& paper_key);

}  // namespace dg
