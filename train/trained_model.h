// A model written by `depthgrad train` — final weights (model.safetensors) or a training
// checkpoint (checkpoint.safetensors) — rebuilt for use: the config from the file's
// "depthgrad.config" metadata, a MicroLM of that config, the weights loaded and checked.
// Used by `depthgrad eval` and `depthgrad generate`. It does not restore optimizer or trainer
// state (Trainer::load_checkpoint does) and does not look for the tokenizer.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "nn/micro_lm.h"
#include "train/run_config.h"

namespace dg {

struct TrainedModel {
  RunConfig config;
  std::unique_ptr<MicroLM> model;
  std::map<std::string, std::string> metadata;
};

// Throws naming `path` when the file is not safetensors, has no depthgrad.config (not a model
// written by depthgrad train), or its tensors do not fit that config.
TrainedModel load_trained_model(const std::string& path);

// Throws naming `path` when the file records the SHA-256 of the tokenizer the model was trained
// with ("depthgrad.tokenizer_sha256", final weights only) and `tokenizer_sha256` differs from it;
// `tokenizer_source` names where that tokenizer came from.
void check_tokenizer_sha256(const TrainedModel& m, const std::string& path,
                            const std::string& tokenizer_sha256,
                            const std::string& tokenizer_source);

}  // namespace dg
