// Loading a model written by depthgrad train (see trained_model.h).
#include "train/lm/trained_model.h"

#include <fmt/format.h>

#include "nn/lm/decode.h"
#include "train/checkpoint.h"
#include "train/io/safetensors.h"
#include "train/lm/memory_budget.h"

namespace dg {

TrainedModel load_trained_model(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  auto it = file.metadata.find("depthgrad.config");
  if (it == file.metadata.end())
    throw std::runtime_error(fmt::format(
        "{}: no 'depthgrad.config' metadata: not a model written by depthgrad train", path));
  TrainedModel m;
  m.config = run_config_from_json(json::parse(it->second, path), path);
  check_memory_fits(estimate_memory(m.config.model, 0),
                    fmt::format("{}: the model {}", path, m.config.model.describe()));
  m.model = std::make_shared<MicroLM>(m.config.model);
  m.metadata = load_weights(file, path, *m.model);
  return m;
}

std::unique_ptr<CausalLM> TrainedModel::causal_lm() const {
  return std::make_unique<Decoder>(std::shared_ptr<const MicroLM>(model));
}

void check_tokenizer_sha256(const TrainedModel& m, const std::string& path,
                            const std::string& tokenizer_sha256,
                            const std::string& tokenizer_source) {
  auto it = m.metadata.find("depthgrad.tokenizer_sha256");
  if (it != m.metadata.end() && it->second != tokenizer_sha256)
    throw std::runtime_error(
        fmt::format("{}: the model was trained with another tokenizer (sha256 {}) than {} ({})",
                    path, it->second, tokenizer_source, tokenizer_sha256));
}

}  // namespace dg
