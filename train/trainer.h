// Trainer: the training loop of any Module, as an object that can stop and resume exactly.
// The caller gives the model (built and initialised), a loss (a function of the model and a
// batch), the data (a Dataset and a Sampler, train/dataset.h) and the training settings
// (TrainingConfig, train/lm/run_config.h); the Trainer owns AdamW over the model's flat buffers and
// runs steps in one order: draw the step's examples, zero the gradients, forward and loss,
// backward, clip, optimizer step.
//
// What it guarantees, for every model (tests/test_trainer.cpp, tests/test_loop_models.cpp):
//  - Resume: a checkpoint holds the weights by parameter name, AdamW's moments, the step, the
//    sampler's position and RNG, the default generator (dropout's draws), the loss record and
//    the wall time, so a resumed run gives bit-identical losses and weights to an uninterrupted
//    one. The caller's JSON config is stored as metadata and must match on resume.
//  - Accumulation and ranks: with accum > 1 or over several processes (train/data_parallel.h) a
//    step runs the micro-batches of one global batch and gives the same bits however they are
//    spread over the processes; ZeRO-1 (zero = 1) shards the moments and changes no bit.
//  - Divergence: a non-finite loss or gradient stops the run before the optimizer step, naming
//    the step and the first non-finite tensor (or skips the step when asked).
// The loss must be a mean over the batch's examples (so that micro-batch means average to the
// global batch's mean). Of TrainingConfig the loop reads steps, batch, accum, clip, adamw,
// schedule and zero; seed, init and sequential are recorded and checked on resume but act through
// the caller (the sampler carries its own seed; MicroLMTrainer passes training.seed to it and to
// the model's initialisation).
// It does not read files, build models or print: the CLI and the examples do.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/data_parallel.h"
#include "train/dataset.h"
#include "train/io/json.h"
#include "train/lm/run_config.h"
#include "train/optim.h"

namespace dg {

// The loss of one (micro-)batch: a scalar tensor, the mean over the batch's examples.
using LossFunction = std::function<Tensor(Module& model, const Batch& batch)>;

struct StepLog {
  int64_t step = 0;   // 0-based
  int64_t steps = 0;  // total
  double loss = 0;
  double grad_norm = 0;  // before clipping
  bool clipped = false;
  double lr = 0;
  double seconds = 0;            // wall time of this step
  double tokens_per_second = 0;  // examples/s × the dataset's tokens per example
  bool skipped = false;          // a non-finite loss or gradient: no optimizer step (skip mode)
  int64_t skipped_steps = 0;     // steps skipped so far in the run
};

// Thrown when a step's loss or gradient is not finite and skipping is off: the run diverged at
// `step` (0-based). The message names the step, the loss and the first non-finite tensor; the
// model is left as before the step.
struct TrainingDiverged : std::runtime_error {
  TrainingDiverged(int64_t step, double loss, const std::string& problem);
  int64_t step;
  double loss;
};

// What a Trainer is made of besides its settings. The model and the dataset must outlive the
// Trainer (or be handed over as shared_ptrs); `config` is the caller's description of the model
// (any JSON), stored in checkpoints as "depthgrad.config"'s "model" and compared on resume.
struct TrainingSetup {
  std::shared_ptr<Module> model;
  std::shared_ptr<const Dataset> data;
  Sampler sampler;
  LossFunction loss;
  json::Value config;
  Collectives* world = nullptr;  // not owned; null = one process
};

class Trainer {
 public:
  // The model and data by reference: both must outlive the Trainer.
  Trainer(Module& model, const Dataset& data, Sampler sampler, LossFunction loss,
          const TrainingConfig& config, json::Value model_config = {},
          Collectives* world = nullptr);
  Trainer(TrainingSetup setup, const TrainingConfig& config);

  // Runs steps until `step()` == until (or config.steps). Calls on_step after each.
  void run(int64_t until, const std::function<void(const StepLog&)>& on_step = {});
  void run() { run(config_.steps); }
  // One step; returns its log. Throws TrainingDiverged (see set_skip_nonfinite).
  StepLog train_step();
  int64_t step() const { return step_; }
  Module& model() { return *model_; }
  const Dataset& dataset() const { return *data_; }
  const Sampler& sampler() const { return sampler_; }
  FlatParameters& parameters() { return flat_; }
  AdamW& optimizer() { return *optimizer_; }
  const TrainingConfig& config() const { return config_; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<double>& grad_norms() const { return grad_norms_; }
  int64_t clipped_steps() const { return clipped_; }
  // Examples per optimizer step over all ranks: ranks × accum × batch.
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

  // {"model": the caller's config, "training": the settings}: the checkpoint's metadata.
  json::Value config_json() const;
  // With ranks: called by every rank; rank 0 writes the one file (atomically), and every rank
  // returns once it is complete. `metadata` is added to the file's (keys must not start with
  // "depthgrad.").
  void save_checkpoint(const std::string& path,
                       const std::map<std::string, std::string>& metadata = {}) const;
  // Restores a checkpoint written by save_checkpoint for the same model config, seed and data
  // stream (checked before anything changes). The global batch must be the checkpoint's; how it
  // is split (ranks × accum × batch) may differ.
  void load_checkpoint(const std::string& path);

 private:
  void setup();
  std::shared_ptr<Module> model_;
  std::shared_ptr<const Dataset> data_;
  Sampler sampler_;
  LossFunction loss_;
  json::Value model_config_;
  TrainingConfig config_;
  FlatParameters flat_;
  std::unique_ptr<AdamW> optimizer_;
  Batch batch_;
  std::vector<int64_t> step_indices_;  // the step's global batch of examples
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
  StepLog finished_step(double loss, const ClipResult& clip, double lr,
                        std::chrono::steady_clock::time_point start);
  std::unique_ptr<AdamW> full_optimizer_state() const;  // ZeRO-1: every rank's moments on rank 0
  void take_optimizer_shard(AdamW& full);               // ZeRO-1: this rank's part of `full`
  Collectives* world_ = nullptr;
  bool zero1_ = false;  // moments sharded: config.zero == 1 on more than one rank
  std::vector<int64_t> shard_bounds_;
  GradientNormBlocks norm_blocks_;
  std::vector<double> micro_losses_;
  Tensor gradient_sum_;  // [total] Σ of this rank's micro-batch gradients

  bool skip_nonfinite_ = false;
  int64_t skipped_ = 0;            // losses_ and grad_norms_ hold the steps that were not skipped
  double prior_wall_seconds_ = 0;  // invocations before the last resume
  // when this process started the run: construction, or the last load_checkpoint
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// The mean of `loss` over every example of `data` (batches of up to `batch`, in order, weighted
// by their sizes), in eval mode and without a graph; the model's train/eval mode is restored.
double evaluate_loss(Module& model, const Dataset& data, const LossFunction& loss,
                     int64_t batch = 32);

}  // namespace dg
