// The tiny training run whose checkpoints fuzz_checkpoint loads and make_corpus writes as seeds:
// a micro-LM of vocabulary 8, width 4 and one layer, sequential batches over 64 synthetic ids.
// Test code only; changing it invalidates the checkpoint seeds (re-run make_corpus).
#pragma once
#include <cstdint>
#include <vector>

#include "train/lm/micro_lm_training.h"

namespace dg::fuzz {

inline RunConfig tiny_config() {
  RunConfig config;
  config.model.vocab = 8;
  config.model.dim = 4;
  config.model.layers = 1;
  config.model.heads = 1;
  config.model.kv_heads = 1;
  config.model.seq_len = 4;
  config.model.expansion = 1;
  config.training.steps = 6;
  config.training.batch = 2;
  config.training.seed = 1;
  config.training.sequential = true;
  return config;
}

inline const std::vector<int32_t>& tiny_train_ids() {
  static const std::vector<int32_t> ids = [] {
    std::vector<int32_t> out(64);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>((i * i + 3 * i) % 8);
    return out;
  }();
  return ids;
}

}  // namespace dg::fuzz
