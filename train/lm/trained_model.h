// A model written by `depthgrad train` — final weights (model.safetensors) or a training
// checkpoint (checkpoint.safetensors) — rebuilt for use: the run config from the file's
// "depthgrad.config" metadata, a MicroLM of its model section, the weights loaded and checked,
// and that model handed to generation as a CausalLM (nn/lm/causal_lm.h). Used by `depthgrad eval`
// and `depthgrad generate`. It does not restore optimizer or trainer state (the training
// checkpoint's loader does) and does not look for the tokenizer.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "nn/lm/causal_lm.h"
#include "nn/lm/micro_lm.h"
#include "train/lm/run_config.h"

namespace dg {

struct TrainedModel {
  // The metadata's {"model": ..., "training": ...} (and "data" when the file records it; the
  // defaults otherwise), read by run_config_from_json.
  RunConfig config;
  std::shared_ptr<MicroLM> model;
  std::map<std::string, std::string> metadata;

  // The model for generation: its K/V-cached Decoder (nn/lm/decode.h), which shares the model, so
  // it may outlive this value. The generation code needs nothing else of the MicroLM.
  std::unique_ptr<CausalLM> causal_lm() const;
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
