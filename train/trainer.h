// Trainer: the training loop of a MicroLM as an object that can stop and resume exactly.
// It owns the model, the flat parameter/gradient buffers, AdamW and the batch RNG (or a
// sequential loader), and runs steps in the reference's order: sample the batch, zero the
// gradients, forward, loss, backward, clip, optimizer step. A training checkpoint holds the
// weights, AdamW moments, step, RNG state and data position, so resuming gives bit-identical
// losses and weights to an uninterrupted run (tests/test_trainer.cpp proves it).
// It does not read data files or tokenize (callers pass token ids).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/micro_lm.h"
#include "train/io/json.h"
#include "train/batches.h"
#include "train/data_parallel.h"
#include "train/optim.h"

namespace dg {

// How weights start: the reference's torch draw order (parity) or name-keyed draws that make
// block and rd arms start as the same function (identical).
enum class InitScheme { parity, identical };
InitScheme parse_init_scheme(const std::string& text);
const char* init_scheme_name(InitScheme s);

struct StepLog {
  int64_t step = 0;         // 0-based
  int64_t steps = 0;        // total
  double loss = 0;
  double grad_norm = 0;     // before clipping
  bool clipped = false;
  double lr = 0;
  double seconds = 0;       // wall time of this step
  double tokens_per_second = 0;
};

struct TrainerConfig {
  MicroLMConfig model;
  int64_t steps = 30;
  int64_t batch = 4;
  double clip = 1.0;
  AdamWConfig adamw;
  Schedule schedule;  // kind/warmup/total; lr taken from adamw.lr
  InitScheme init = InitScheme::parity;
  uint64_t seed = 42;
  bool sequential = false;  // consecutive windows instead of the reference's random windows
  // Micro-batches of `batch` windows per optimizer step in each process (gradient accumulation);
  // a step's global batch is ranks × accum × batch (train/data_parallel.h).
  int64_t accum = 1;

  json::Value to_json() const;
  static TrainerConfig from_json(const json::Value& v, const std::string& source);  // errors name source and field
};

class Trainer {
 public:
  Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids);
  // Data parallel over `world` (train/data_parallel.h; not owned, may be null = one process):
  // rank r runs micro-batches r·accum … r·accum + accum − 1 of every step's global batch, and
  // the result is bit-identical to one process with accum × ranks. zero1 shards AdamW's moments.
  Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids, Collectives* world, bool zero1);
  // Runs steps until `step()` == until (or config.steps). Calls on_step after each.
  void run(int64_t until, const std::function<void(const StepLog&)>& on_step = {});
  // One step; returns its log.
  StepLog train_step();
  int64_t step() const { return step_; }
  MicroLM& model() { return *model_; }
  FlatParameters& parameters() { return flat_; }
  const TrainerConfig& config() const { return config_; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<double>& grad_norms() const { return grad_norms_; }
  int64_t clipped_steps() const { return clipped_; }
  // Windows per optimizer step over all ranks: ranks × accum × batch.
  int64_t global_batch() const;
  int ranks() const { return world_ ? world_->size() : 1; }

  // With ranks: called by every rank; rank 0 writes the one file (atomically), and every rank
  // returns once it is complete.
  void save_checkpoint(const std::string& path) const;
  // Restores a checkpoint written by save_checkpoint for the same config (checked).
  void load_checkpoint(const std::string& path);

 private:
  TrainerConfig config_;
  const std::vector<int32_t>& train_ids_;
  std::unique_ptr<MicroLM> model_;
  FlatParameters flat_;
  std::unique_ptr<AdamW> optimizer_;
  NumpyGenerator batch_rng_;
  std::unique_ptr<SequentialLoader> loader_;
  LmBatch batch_;
  int64_t step_ = 0;
  std::vector<double> losses_, grad_norms_;
  int64_t clipped_ = 0;

  // Accumulation and data parallelism (train/data_parallel.cpp).
  bool accumulates() const { return config_.accum > 1 || ranks() > 1; }
  void setup_data_parallel();
  StepLog accumulated_step();
  std::unique_ptr<AdamW> full_optimizer_state() const;         // zero1: every rank's moments on rank 0
  void take_optimizer_shard(AdamW& full);                       // zero1: this rank's part of `full`
  Collectives* world_ = nullptr;
  bool zero1_ = false;
  std::vector<int64_t> shard_bounds_;
  GradientNormBlocks norm_blocks_;
  std::vector<double> block_sums_, micro_losses_;
  std::vector<int64_t> micro_starts_;
  LmBatch step_windows_;  // the step's global batch of windows
  Tensor gradient_sum_;   // [total] Σ of this rank's micro-batch gradients
};

}  // namespace dg
