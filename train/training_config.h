// TrainingConfig: the training loop's own settings (train/trainer.h), with one JSON mapping that
// checkpoints record: steps, batch, accum, clip, zero (ZeRO stage), overlap, seed, the matmul
// precision and anomaly mode. It holds nothing of an optimiser, a schedule or a model: those are
// objects the caller gives the Trainer (train/optim.h), and their settings are the caller's. Each
// setting is declared once, as a row of training_config_settings() (train/settings.h); the default
// is the field's initializer.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/gemm_kernels.h"
#include "train/io/json.h"
#include "train/settings.h"

namespace dg {

struct TrainingConfig {
  int64_t steps = 30;  // optimizer steps of the whole run
  int64_t batch = 4;   // examples per micro-batch
  // Micro-batches of `batch` examples per optimizer step in each process (gradient accumulation;
  // losses and gradients are averaged over them). A step's global batch is ranks × accum × batch
  // (train/data_parallel.h): the number of ranks is not part of the config.
  int64_t accum = 1;
  double clip = 0;  // max global gradient norm; <= 0 disables clipping (the default)
  // Sharding over the ranks (ZeRO): 0 = every rank holds everything; 1 = the optimiser's
  // per-element state sharded (stage 1); 2 = that and the gradients: each rank keeps only its
  // shard of the summed gradient (stage 2, train/gradient_reducer.h). Changes no bit of a result,
  // only where the state lives.
  int64_t zero = 0;
  // Over ranks: the gradient's buckets are summed while backward runs (train/gradient_reducer.h)
  // rather than after it. Changes no bit; not checked on resume.
  bool overlap = true;
  // The seed of the run, recorded and checked on resume; it acts through the caller (the sampler
  // and the model's initialisation take it), not through the loop.
  uint64_t seed = 42;
  // The precision of every float32 matmul while the trainer steps (tensor/gemm_kernels.h):
  // float32, or bf16 inputs with float32 accumulation.
  MatmulPrecision precision = MatmulPrecision::float32;
  // Runs each step's forward and backward under dg::DetectAnomalyGuard (autograd/tape.h): the
  // first non-finite gradient stops the run naming the op whose backward made it and the module
  // whose forward recorded that op. Slower (every node notes where it was made); off by default.
  // Changes no value, so it is not recorded unless on and not checked on resume.
  bool detect_anomaly = false;
};

// The rows of TrainingConfig, section "training", in its JSON's key order.
const SettingsTable<TrainingConfig>& training_config_settings();
// {"steps": …, "batch": …, "clip": …, "seed": …, "accum": …, "zero": …} (and "precision" when not
// float32, "detect_anomaly" when true), in the rows' order.
json::Value training_config_json(const TrainingConfig& config);
// The inverse; absent keys keep their defaults. Errors name `source` and the key.
TrainingConfig training_config_from_json(const json::Value& value,
                                         const std::string& source = "training config");
// Throws std::invalid_argument naming the first setting out of range.
void validate(const TrainingConfig& config);

}  // namespace dg
