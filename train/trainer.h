// Trainer: the training loop of a MicroLM as an object that can stop and resume exactly.
// It owns the model, the flat parameter/gradient buffers, AdamW and the batch RNG (or a
// sequential loader), and runs steps in the reference's order: sample the batch, zero the
// gradients, forward, loss, backward, clip, optimizer step. A training checkpoint holds the
// weights, AdamW moments, step, RNG state and data position, so resuming gives bit-identical
// losses and weights to an uninterrupted run (tests/test_trainer.cpp proves it).
// With accum > 1 or over several processes (train/data_parallel.h) a step runs the micro-batches
// of one global batch and gives the same bits however they are spread over the processes.
// It does not read data files or tokenize (callers pass token ids).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/micro_lm.h"
#include "train/batches.h"
#include "train/data_parallel.h"
#include "train/io/json.h"
#include "train/optim.h"
#include "train/run_config.h"

namespace dg {

struct StepLog {
  int64_t step = 0;   // 0-based
  int64_t steps = 0;  // total
  double loss = 0;
  double grad_norm = 0;  // before clipping
  bool clipped = false;
  double lr = 0;
  double seconds = 0;  // wall time of this step
  double tokens_per_second = 0;
  bool skipped = false;       // a non-finite loss or gradient: no optimizer step (skip mode)
  int64_t skipped_steps = 0;  // steps skipped so far in the run
};

// Thrown when a step's loss or gradient is not finite and skipping is off: the run diverged at
// `step` (0-based). The message names the step, the loss and the first non-finite tensor; the
// model is left as before the step.
struct TrainingDiverged : std::runtime_error {
  TrainingDiverged(int64_t step, double loss, const std::string& problem);
  int64_t step;
  double loss;
};

// What the Trainer needs: the training settings (train/run_config.h) and the model they train.
// A RunConfig gives one with trainer_config(); evolve builds its own from a genome.
struct TrainerConfig : TrainingConfig {
  MicroLMConfig model;

  // {"model": ..., "training": ...}: the run config's mapping (train/run_config.h) without the
  // data section; what checkpoints carry as their 'depthgrad.config' metadata.
  json::Value to_json() const;
  // Reads that (or a whole run config) back; errors name source and key.
  static TrainerConfig from_json(const json::Value& v, const std::string& source);
};
TrainerConfig trainer_config(const RunConfig& run);

class Trainer {
 public:
  // The token ids: an lvalue is read in place and must outlive the Trainer; a temporary (or a
  // moved vector) is moved in and owned; a shared_ptr is shared (kept alive by the Trainer).
  Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids);
  Trainer(const TrainerConfig& config, std::vector<int32_t>&& train_ids);
  // Data parallel over `world` (train/data_parallel.h; not owned, may be null = one process):
  // rank r runs micro-batches r·accum … r·accum + accum − 1 of every step's global batch, and
  // the result is bit-identical to one process with accum × ranks. config.zero = 1 shards
  // AdamW's moments over the ranks.
  Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids, Collectives* world);
  Trainer(const TrainerConfig& config, std::vector<int32_t>&& train_ids, Collectives* world);
  Trainer(const TrainerConfig& config, std::shared_ptr<const std::vector<int32_t>> train_ids,
          Collectives* world = nullptr);
  // Runs steps until `step()` == until (or config.steps). Calls on_step after each.
  void run(int64_t until, const std::function<void(const StepLog&)>& on_step = {});
  // One step; returns its log. Throws TrainingDiverged (see set_skip_nonfinite).
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

  // Off (the default): a non-finite loss or gradient throws TrainingDiverged. On: that step is
  // skipped (no optimizer step; the batch is used up) and counted; training goes on. Like
  // llm.c's outlier skipping, a run option rather than part of what a run computes.
  void set_skip_nonfinite(bool skip) { skip_nonfinite_ = skip; }
  int64_t skipped_steps() const { return skipped_; }
  // Wall-clock seconds of the whole run: those of the invocations before a resume (stored in the
  // checkpoint) plus this one's since the Trainer was made.
  double wall_seconds() const;

  // With ranks: called by every rank; rank 0 writes the one file (atomically), and every rank
  // returns once it is complete.
  void save_checkpoint(const std::string& path) const;
  // Restores a checkpoint written by save_checkpoint for the same config (checked). The global
  // batch must be the checkpoint's; how it is split (ranks × accum × batch) may differ.
  void load_checkpoint(const std::string& path);

 private:
  TrainerConfig config_;
  const std::vector<int32_t>& train_ids_;  // *owned_ids_ when owned or shared
  std::shared_ptr<const std::vector<int32_t>> owned_ids_;
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
  // A step whose loss or gradient is not finite (`problem` says which): throws TrainingDiverged,
  // or with skipping on counts it and returns its log. Both step paths end here.
  StepLog nonfinite_step(double loss, const std::string& problem,
                         std::chrono::steady_clock::time_point start);
  std::unique_ptr<AdamW> full_optimizer_state() const;  // ZeRO-1: every rank's moments on rank 0
  void take_optimizer_shard(AdamW& full);               // ZeRO-1: this rank's part of `full`
  Collectives* world_ = nullptr;
  bool zero1_ = false;  // moments sharded: config.zero == 1 on more than one rank
  std::vector<int64_t> shard_bounds_;
  GradientNormBlocks norm_blocks_;
  std::vector<double> micro_losses_;
  std::vector<int64_t> micro_starts_;
  LmBatch step_windows_;  // the step's global batch of windows
  Tensor gradient_sum_;   // [total] Σ of this rank's micro-batch gradients

  bool skip_nonfinite_ = false;
  int64_t skipped_ = 0;            // losses_ and grad_norms_ hold the steps that were not skipped
  double prior_wall_seconds_ = 0;  // invocations before the last resume
  // when this process started the run: construction, or the last load_checkpoint
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace dg
