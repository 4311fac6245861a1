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
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/micro_lm.h"
#include "train/batches.h"
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
};

// Thrown by a training step whose loss is not finite: the run diverged at `step` (0-based).
struct TrainingDiverged : std::runtime_error {
  TrainingDiverged(int64_t step, double loss);
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
  Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids);
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
};

}  // namespace dg
