// Checkpoints as safetensors files.
//  - Model weights: the model's state_dict(), one F32 (or F64) tensor per parameter and one per
//    persistent buffer (I64 for an integer one: BatchNorm's num_batches_tracked) under its
//    registry name (token.weight, blocks.0.qk_route.weight, bn.running_mean, …): PyTorch's and
//    Hugging Face's safetensors readers load them as a state dict.
//  - Training checkpoints add the optimiser's per-element state per parameter
//    ("optimizer.<state>.<name>": AdamW's "optimizer.exp_avg.<name>" and
//    "optimizer.exp_avg_sq.<name>", SGD's "optimizer.momentum_buffer.<name>", RMSprop's
//    "optimizer.square_avg.<name>" (and momentum_buffer, grad_avg), Adagrad's
//    "optimizer.sum.<name>"), its name ("depthgrad.optimizer") and integer scalars
//    ("depthgrad.optimizer.<scalar>"), RNG states and any other byte blobs as U8 tensors
//    ("state.<key>"), and string metadata (step, config, data position, a schedule's own state).
//    A checkpoint of one optimiser is refused by another, naming both.
// Writes are atomic (temporary file, fsync, rename). A file that is truncated, inconsistent or
// does not fit the model is rejected with an error naming the file and tensor; nothing is
// half-loaded: the model is only touched after every check passed.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/io/safetensors.h"
#include "train/optim.h"

namespace dg {

struct TrainingState {
  std::map<std::string, std::string> metadata;        // strings (step, config JSON, …)
  std::map<std::string, std::vector<uint8_t>> blobs;  // RNG states and the like
};

// Any named set of tensors (float32, float64, int32, int64; any shape, views included) to one
// safetensors file, atomically, and back. Names must be unique; load_tensors returns them in the
// file's order with their stored dtypes. Usage:
//   dg::save_tensors("acts.safetensors", {{"x", x}, {"w", w}});
//   for (auto& [name, t] : dg::load_tensors("acts.safetensors")) ...
void save_tensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                  const std::map<std::string, std::string>& metadata = {});
std::vector<NamedTensor> load_tensors(const std::string& path);

void save_weights(const std::string& path, const Module& model,
                  const std::map<std::string, std::string>& metadata = {});
// Loads weights and persistent buffers into `model` (names, shapes checked; F32/F64 converted,
// I32/I64 for an integer buffer). Returns the metadata.
// A training checkpoint's optimizer and state sections ("optimizer.*", "state.*") are skipped;
// any other tensor that is not a parameter of the model is an error.
std::map<std::string, std::string> load_weights(const std::string& path, Module& model);
// The same from a file already read (`path` names it in errors).
std::map<std::string, std::string> load_weights(const SafetensorsFile& file,
                                                const std::string& path, Module& model);

// An optimiser's state as a checkpoint holds it: its name, its per-element state over the whole
// flat buffer (one tensor of [total] elements per state name, FlatOptimizer::element_state
// gathered from the shards) and its scalars.
struct OptimizerState {
  std::string name;
  std::vector<NamedTensor> elements;
  std::map<std::string, int64_t> scalars;
};
// The state of an unsharded optimiser (its own tensors, not copies).
OptimizerState optimizer_state(FlatOptimizer& optimizer);

// A training checkpoint holds the model's trainable parameters (requires_grad true), its persistent
// buffers, the optimiser's state of each trainable parameter and `state`. A frozen parameter (a
// LoRA run's base, nn/lora.h) is not saved, and loading leaves it as it is: the caller rebuilds the
// model as the run had it (builds or imports the base, lora::apply with the same options), then
// loads the checkpoint, which brings back the adapters and their optimiser state.
void save_training_checkpoint(const std::string& path, const Module& model,
                              const OptimizerState& optimizer, const TrainingState& state);
inline void save_training_checkpoint(const std::string& path, const Module& model,
                                     FlatOptimizer& optimizer, const TrainingState& state) {
  save_training_checkpoint(path, model, optimizer_state(optimizer), state);
}
// Restores model weights and the optimiser's state: `optimizer` names the optimiser, its element
// tensors ([total] each, written into) and its scalars (every name is read back). A file of
// another optimiser (metadata 'depthgrad.optimizer'; a file without it holds AdamW's state)
// is refused naming both. Returns the metadata and blobs.
TrainingState load_training_checkpoint(const SafetensorsFile& file, const std::string& path,
                                       Module& model, OptimizerState& optimizer);
// The same into an unsharded optimiser.
TrainingState load_training_checkpoint(const std::string& path, Module& model,
                                       FlatOptimizer& optimizer);

}  // namespace dg
