// The resumable training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/tape.h"
#include "train/checkpoint.h"

namespace dg {

// ---- config <-> JSON: the run config's mapping ------------------------------------------------

json::Value TrainerConfig::to_json() const {
  json::Value v;
  v["model"] = model_json(model);
  v["training"] = training_json(*this);
  return v;
}

TrainerConfig TrainerConfig::from_json(const json::Value& v, const std::string& source) {
  return trainer_config(run_config_from_json(v, source));
}

TrainingDiverged::TrainingDiverged(int64_t step_, double loss_)
    : std::runtime_error(fmt::format("training diverged: loss is {} at step {}", loss_, step_)),
      step(step_),
      loss(loss_) {}

TrainerConfig trainer_config(const RunConfig& run) {
  return TrainerConfig{run.training, run.model};
}

// ---- the loop
// ---------------------------------------------------------------------------------------------

Trainer::Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids)
    : config_(config), train_ids_(train_ids), batch_rng_(config.seed) {
  config_.model.validate();
  // §1.4 order: model (init from the seed), optimizer, then the batch RNG.
  model_ = std::make_unique<MicroLM>(config_.model, DType::f32);
  if (config_.init == InitScheme::parity)
    model_->init_torch_parity(config_.seed);
  else
    model_->init_identical(config_.seed);
  flat_ = flatten_parameters(*model_);
  optimizer_ = std::make_unique<AdamW>(flat_, config_.adamw);
  // The parameters' first buffers (replaced by views into the flat buffer) and init's scratch
  // sit in the storage cache in sizes the steps never ask for: give them back to the system.
  storage_cache_clear();
  config_.schedule.lr = config_.adamw.lr;  // the schedule's rate and length are the run's
  config_.schedule.total_steps = config_.steps;
  if (config_.sequential)
    loader_ = std::make_unique<SequentialLoader>(train_ids_, config_.batch, config_.model.seq_len);
}

StepLog Trainer::train_step() {
  const auto start = std::chrono::steady_clock::now();
  if (loader_)
    loader_->next(batch_);
  else
    sample_lm_batch(batch_rng_, train_ids_, config_.batch, config_.model.seq_len, batch_);
  flat_.zero_grad();
  Tensor loss = model_->loss(batch_.inputs, batch_.targets);
  backward(loss);
  ClipResult clip = config_.clip > 0 ? clip_grad_norm(flat_, config_.clip) : ClipResult{};
  const double lr = config_.schedule.at(step_);
  optimizer_->step(lr);
  const double value = loss.item();
  if (!std::isfinite(value)) throw TrainingDiverged(step_, value);
  losses_.push_back(value);
  grad_norms_.push_back(clip.total_norm);
  clipped_ += clip.clipped ? 1 : 0;
  StepLog log{step_, config_.steps, value, clip.total_norm, clip.clipped, lr, 0, 0};
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.tokens_per_second =
      static_cast<double>(config_.batch * config_.model.seq_len) / std::max(log.seconds, 1e-9);
  ++step_;
  return log;
}

void Trainer::run(int64_t until, const std::function<void(const StepLog&)>& on_step) {
  until = std::min(until, config_.steps);
  model_->train();
  while (step_ < until) {
    StepLog log = train_step();
    if (on_step) on_step(log);
  }
}

// ---- checkpoints
// ----------------------------------------------------------------------------------------------

void Trainer::save_checkpoint(const std::string& path) const {
  TrainingState state;
  state.metadata["depthgrad.kind"] = "training-checkpoint";
  state.metadata["depthgrad.config"] = json::dump(config_.to_json());
  state.metadata["depthgrad.step"] = std::to_string(step_);
  state.metadata["depthgrad.clipped_steps"] = std::to_string(clipped_);
  state.metadata["depthgrad.data_position"] = std::to_string(loader_ ? loader_->position() : 0);
  state.blobs["batch_rng"] = batch_rng_.state();
  auto pack = [](const std::vector<double>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(double));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  state.blobs["losses"] = pack(losses_);
  state.blobs["grad_norms"] = pack(grad_norms_);
  save_training_checkpoint(path, *model_, *optimizer_, state);
}

void Trainer::load_checkpoint(const std::string& path) {
  // Check the config before touching anything: a checkpoint of another model or run is refused.
  SafetensorsFile file = load_safetensors(path);  // read once: checked here, applied below
  {
    auto it = file.metadata.find("depthgrad.config");
    if (it == file.metadata.end())
      throw std::runtime_error(fmt::format(
          "{}: metadata 'depthgrad.config' is missing (not a depthgrad training checkpoint)",
          path));
    json::Value saved = json::parse(it->second, path + " (depthgrad.config)");
    json::Value mine = config_.to_json();
    auto field = [](const json::Value& config, const char* section,
                    const char* key) -> const json::Value* {
      const json::Value* s = config.is_object() ? config.find(section) : nullptr;
      return s && s->is_object() ? (key ? s->find(key) : s) : nullptr;
    };
    for (auto [section, key] : {std::pair<const char*, const char*>{"model", nullptr},
                                {"training", "batch"},
                                {"training", "seed"},
                                {"training", "sequential"},
                                {"training", "init"}}) {
      const json::Value* s = field(saved, section, key);
      const json::Value* m = field(mine, section, key);
      const std::string name = key ? fmt::format("{}.{}", section, key) : section;
      if (!s || !(*s == *m))
        throw std::runtime_error(
            fmt::format("{}: the checkpoint's '{}' ({}) differs from this run's ({})", path, name,
                        s ? json::dump(*s) : "missing", json::dump(*m)));
    }
  }
  // The trainer's own state is read and checked before anything changes, so a bad checkpoint
  // leaves the trainer as it was (load_training_checkpoint checks all of its part before copying).
  auto meta = [&](const char* key) -> const std::string& {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      throw std::runtime_error(fmt::format("{}: metadata '{}' is missing", path, key));
    return it->second;
  };
  // A whole-string integer in [0, max]: a negative or huge data position once read out of bounds.
  auto count = [&](const char* key, int64_t max) {
    const std::string& text = meta(key);
    int64_t value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > max)
      throw std::runtime_error(fmt::format(
          "{}: metadata '{}' is '{}', expected an integer in [0, {}]", path, key, text, max));
    return value;
  };
  const int64_t step = count("depthgrad.step", std::numeric_limits<int64_t>::max());
  const int64_t clipped = count("depthgrad.clipped_steps", step);
  const int64_t position =
      count("depthgrad.data_position", static_cast<int64_t>(train_ids_.size()));
  auto blob = [&](const char* key) -> const std::vector<uint8_t>& {
    const TensorEntry* e = file.find(std::string("state.") + key);
    if (!e) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
    if (e->dtype != "U8")
      throw std::runtime_error(fmt::format("{}: tensor 'state.{}' must be U8", path, key));
    return e->bytes;
  };
  NumpyGenerator batch_rng = batch_rng_;
  try {
    batch_rng.set_state(blob("batch_rng"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.batch_rng': {}", path, e.what()));
  }
  auto unpack = [&](const char* key) {
    const std::vector<uint8_t>& b = blob(key);
    if (b.size() % sizeof(double) != 0)
      throw std::runtime_error(fmt::format(
          "{}: 'state.{}' has {} bytes, not a whole number of doubles", path, key, b.size()));
    std::vector<double> v(b.size() / sizeof(double));
    if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());  // data() may be null when empty
    return v;
  };
  std::vector<double> losses = unpack("losses"), grad_norms = unpack("grad_norms");

  load_training_checkpoint(file, path, *model_, *optimizer_);
  step_ = step;
  clipped_ = clipped;
  if (loader_) loader_->set_position(position);
  batch_rng_ = batch_rng;
  losses_ = std::move(losses);
  grad_norms_ = std::move(grad_norms);
}

}  // namespace dg
