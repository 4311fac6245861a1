// `depthgrad reproduce --paper rd-attnres`: the Block AttnRes vs RD-AttnRes comparison.
//
//  parity protocol (default): exactly the reference run (tools/attnres/PROTOCOL.md §6): BPE-512 on
//    WikiText-2 train + Tiny Shakespeare, 120k train ids, block_attnres then rd_attnres, 30 AdamW
//    steps each from torch-parity init, evaluation on 32 windows of 64 validation ids, JS from the
//    last training batch. Its numbers are the ones the reference prints on the same data.
//  paired protocol: both arms per seed with the same data order (and, with init identical, the
//    same starting function); per-seed paired differences of validation NLL, wins, the mean
//    difference with a 95% t interval, an exact sign test, and per-layer JS on the validation
//    windows after training (mean and distribution).
// Writes <output>/2608.01075-rd-attnres/<timestamp>/{result.json, metrics.json, report.md,
// report.html, tokenizer.json} atomically. result.json's "config" is the method arm's RunConfig at
// the first seed (train/lm/run_config.h's mapping, preset name included; the baseline differs only
// in model.mode, other seeds only in training.seed); its "setup" restates it in the reference's
// vocabulary (§6.3); "pair" names the two modes, "scale" holds what the cross-scale report reads
// (preset, parameter counts, tokens seen per arm, compute seconds, thread counts). An arm whose
// loss stops being finite is recorded as diverged with its step (and kept in the state file, so a
// resume does not retry it); its seed is listed under paired.diverged and left out of the
// statistics, which also give the effect in perplexity percent and a verdict (stats.h).
// It does not parse command lines (tools/cli does).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/data_parallel.h"
#include "train/io/json.h"
#include "train/io/run_record.h"
#include "train/lm/micro_lm_training.h"
#include "train/lm/run_config.h"

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

// An arm: a residual mode and its name (the mode's name).
struct ReproduceArm {
  std::string name;
  ResidualMode mode;
  bool operator==(const ReproduceArm&) const = default;
};
// The default pair, in order: the baseline (block_attnres) and the method (rd_attnres).
const std::vector<ReproduceArm>& reproduce_arms();
// "A,B" -> the pair {A, B} (baseline A, method B); throws std::invalid_argument naming --pair for
// an unknown mode, one mode, more than two or two equal ones.
std::vector<ReproduceArm> parse_reproduce_pair(const std::string& text);

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
  // The two arms compared: baseline then method (differences are method − baseline). The parity
  // protocol is the reference's pair only.
  std::vector<ReproduceArm> pair = reproduce_arms();
  std::string data_dir;   // resolved
  std::string cache_dir;  // resolved; empty = no cache
  std::string output_dir = "runs/reproductions";
  // Resume finished (seed, arm) pairs from here (over N ranks with its rank files beside it:
  // <state_file>.rank<r>, one per rank, merged into it when the run finishes).
  std::string state_file;
  // Where the arm in training is saved when a stop is requested (train/stop.h) and resumed from:
  // <dir>/seed-<seed>-<arm>.safetensors, removed when the arm is done. Empty: no arm checkpoints.
  std::string arm_checkpoint_dir;
  // With arm_checkpoint_dir: also save the arm in training after every that many steps (0: only
  // when a stop is requested), so that a killed process loses at most that many steps of it.
  int64_t arm_checkpoint_every = 0;
  std::string run_dir;  // where files go; empty: <output_dir>/<arxiv>-<key>/<timestamp>
  int threads = 1;
  bool write_files = true;
  // Paired protocol over MPI ranks (train/data_parallel.h; null = one process): the i-th seed
  // of the list (from 0) runs on rank i mod N, every rank gets every seed's result (the same bits
  // as one process), and only rank 0 writes the run's files (each rank keeps its own state file and
  // arm checkpoints).
  Collectives* world = nullptr;
  // Over ranks: how long a rank that was stopped (Ctrl-C, SIGTERM) waits for the others to stop
  // too before it ends the job. mpirun passes a signal on to every rank, and each stops after its
  // step, or after its arm when the signal came in its last step or its evaluation (about 100 s
  // for the full validation split at preset small on one thread).
  double rank_stop_wait_seconds = 300;
  // progress: called for every training step of every arm
  std::function<void(const std::string& arm, uint64_t seed, size_t seed_index, size_t seeds,
                     const StepLog&)>
      on_step;
  std::function<void(const std::string& line)> on_message;  // one-line status messages
};

// Throws std::invalid_argument naming what is wrong (paper, protocol, seeds, a config key, a
// dataset other than wikitext-2; over MPI ranks: the parity protocol, fewer seeds than ranks).
// run_reproduce calls it before any work; so can a caller.
void check_reproduce_options(const ReproduceOptions& options);

// The state file's key: the paper, the protocol, the tokenizer's SHA-256, the pair (only when it is
// not the default pair, so state files written before --pair existed stay valid) and the whole run
// config through its one JSON mapping, preset included (with the arm's mode and the seed left out:
// the state records them per result). A state file whose key differs is refused naming the keys
// that differ, so every setting a RunConfig holds, present or future, keeps a state file from
// mixing runs.
json::Value reproduce_resume_key(const ReproduceOptions& options,
                                 const std::string& tokenizer_sha256);
// The leaves where two keys differ, as "path: a vs b" ("pair: absent vs [...]"), at most `limit`.
std::vector<std::string> json_differences(const json::Value& a, const json::Value& b,
                                          size_t limit = 4);

// Per-seed results ({"seed": s, "<arm>": record, ...}, as the state file holds them) split into
// seeds whose two arms finished (the statistics use them) and seeds where an arm diverged (its
// record has "diverged": true), with one {seed, arm, step, loss} per diverged arm, the training and
// evaluation seconds of every finished arm, and the thread counts the arms recorded.
struct SeedSplit {
  std::vector<json::Value> finished, diverged_seeds;
  json::Array diverged;
  double compute_seconds = 0;
  std::vector<int64_t> threads;
};
SeedSplit split_seed_results(const std::vector<json::Value>& all_seeds,
                             const std::vector<ReproduceArm>& pair);

struct ReproduceOutput {
  std::string run_dir;
  json::Value result;
  std::string table;  // the comparison table as printed
};

ReproduceOutput run_reproduce(const ReproduceOptions& options);

// The default run directory for a paper under output_dir.
std::string default_run_dir(const std::string& output_dir, const std::string& paper_key);

}  // namespace dg
