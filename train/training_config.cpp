// The training loop's settings and their JSON (see training_config.h).
#include "train/training_config.h"

#include <stdexcept>

namespace dg {

const SettingsTable<TrainingConfig>& training_config_settings() {
  using T = TrainingConfig;
  const SettingRange size = at_least(1), count = at_least(0);
  static const SettingsTable<TrainingConfig> table{
      setting<T>("training", "steps", path(&T::steps), size, "optimizer steps"),
      setting<T>("training", "batch", path(&T::batch), size, "examples per micro-batch"),
      setting<T>("training", "clip", path(&T::clip), count,
                 "gradient clipping max norm (0 disables clipping)"),
      setting<T>("training", "seed", path(&T::seed), count,
                 "seed of the run (the sampler and the initialisation take it)"),
      setting<T>("training", "accum", path(&T::accum), size,
                 "micro-batches of `batch` examples per optimizer step (gradient accumulation; "
                 "the global batch is ranks × accum × batch)"),
      setting<T>("training", "zero", path(&T::zero), {.low = 0, .high = 2},
                 "ZeRO stage over the ranks: 1 = the optimiser's state sharded, 2 = the gradients "
                 "too; changes no bit"),
      omitted_at_default(setting<T>(
          "training", "overlap", path(&T::overlap), {},
          "over ranks, sum the gradient's buckets while backward runs (false: after it); "
          "changes no bit")),
      omitted_at_default(choice<T>(
          "training", "precision", path(&T::precision),
          [](const std::string& text) { return parse_precision(text); }, precision_name,
          "matmul precision: float32, or bf16 (bf16 inputs, float32 accumulation)")),
      omitted_at_default(setting<T>(
          "training", "detect_anomaly", path(&T::detect_anomaly), {},
          "run forward and backward in anomaly mode: the first non-finite gradient stops the run "
          "naming the op that made it and its module (slower; changes no value)")),
  };
  return table;
}

json::Value training_config_json(const TrainingConfig& config) {
  return section_json(training_config_settings(), "training", config);
}

TrainingConfig training_config_from_json(const json::Value& value, const std::string& source) {
  TrainingConfig config;
  read_section(training_config_settings(), "training", value, config, source);
  try {
    validate(config);
  } catch (const std::exception& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  return config;
}

void validate(const TrainingConfig& config) {
  try {
    check_settings(training_config_settings(), config);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("trainer: ") + e.what());
  }
}

}  // namespace dg
