// The resumable training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "autograd/tape.h"
#include "train/checkpoint.h"
#include "train/memory_budget.h"

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

TrainingDiverged::TrainingDiverged(int64_t step_, double loss_, const std::string& problem)
    : std::runtime_error(
          fmt::format("training diverged at step {} (0-based): loss {}, {}; stopped before the "
                      "optimizer step (--skip-nonfinite skips such steps instead)",
                      step_, loss_, problem)),
      step(step_),
      loss(loss_) {}

TrainerConfig trainer_config(const RunConfig& run) {
  return TrainerConfig{run.training, run.model};
}

// ---- the loop

Trainer::Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids)
    : Trainer(config, train_ids, nullptr) {}

Trainer::Trainer(const TrainerConfig& config, std::vector<int32_t>&& train_ids)
    : Trainer(config, std::move(train_ids), nullptr) {}

Trainer::Trainer(const TrainerConfig& config, std::vector<int32_t>&& train_ids, Collectives* world)
    : Trainer(config, std::make_shared<const std::vector<int32_t>>(std::move(train_ids)), world) {}

namespace {
const std::vector<int32_t>& non_null(const std::shared_ptr<const std::vector<int32_t>>& ids) {
  if (!ids) throw std::invalid_argument("trainer: the token ids are a null shared_ptr");
  return *ids;
}
}  // namespace

Trainer::Trainer(const TrainerConfig& config, std::shared_ptr<const std::vector<int32_t>> train_ids,
                 Collectives* world)
    : Trainer(config, non_null(train_ids), world) {
  owned_ids_ = std::move(train_ids);
}

Trainer::Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids,
                 Collectives* world)
    : config_(config), train_ids_(train_ids), batch_rng_(config.seed), world_(world) {
  if (world_ && world_->size() == 1) world_ = nullptr;  // a group of one is one process
  if (config_.accum < 1)
    throw std::invalid_argument(fmt::format("trainer: accum must be >= 1, got {}", config_.accum));
  zero1_ = config_.zero == 1 && world_;
  config_.model.validate();
  // An absurd size is refused with what it needs before anything is allocated (a bad_alloc
  // half-way through building the model says nothing useful).
  check_memory_fits(
      estimate_memory(config_.model, config_.batch),
      fmt::format("training {} with batch {}", config_.model.describe(), config_.batch));
  // §1.4 order: model (init from the seed), optimizer, then the batch RNG.
  model_ = std::make_unique<MicroLM>(config_.model, DType::f32);
  if (config_.init == InitScheme::parity)
    model_->init_torch_parity(config_.seed);
  else
    model_->init_identical(config_.seed);
  flat_ = flatten_parameters(*model_);
  if (accumulates()) setup_data_parallel();  // shard bounds; ZeRO-1 keeps this rank's moments
  if (zero1_)
    optimizer_ = std::make_unique<AdamW>(flat_, config_.adamw, shard_bounds_[world_->rank()],
                                         shard_bounds_[world_->rank() + 1]);
  else
    optimizer_ = std::make_unique<AdamW>(flat_, config_.adamw);
  // The parameters' first buffers (replaced by views into the flat buffer) and init's scratch
  // sit in the storage cache in sizes the steps never ask for: give them back to the system.
  storage_cache_clear();
  config_.schedule.lr = config_.adamw.lr;  // the schedule's rate and length are the run's
  config_.schedule.total_steps = config_.steps;
  if (config_.sequential)
    loader_ = std::make_unique<SequentialLoader>(train_ids_, global_batch(), config_.model.seq_len);
}

int64_t Trainer::global_batch() const { return ranks() * config_.accum * config_.batch; }

namespace {
// Test hook (tests/cli_hardening.sh): DEPTHGRAD_TEST_NONFINITE_STEP=k makes step k's gradient of
// the first parameter NaN, as a spike would. Read once; -1 (unset) costs one compare per step.
int64_t nonfinite_test_step() {
  static const int64_t step = [] {
    const char* value = std::getenv("DEPTHGRAD_TEST_NONFINITE_STEP");
    return value && *value ? std::strtoll(value, nullptr, 10) : int64_t{-1};
  }();
  return step;
}

// The name of the first slot whose values (of `flat`: the values or the gradients) are not all
// finite, or "" when every one is.
std::string first_nonfinite(const FlatParameters& flat, const Tensor& buffer) {
  const float* data = buffer.data<float>();
  for (const FlatParameters::Slot& slot : flat.slots)
    for (int64_t i = 0; i < slot.numel; ++i)
      if (!std::isfinite(data[slot.offset + i])) return slot.name;
  return "";
}
}  // namespace

StepLog Trainer::train_step() {
  if (accumulates()) return accumulated_step();
  const auto start = std::chrono::steady_clock::now();
  if (loader_)
    loader_->next(batch_);
  else
    sample_lm_batch(batch_rng_, train_ids_, config_.batch, config_.model.seq_len, batch_);
  flat_.zero_grad();
  Tensor loss = model_->loss(batch_.inputs, batch_.targets);
  const double value = loss.item();
  // A non-finite loss or gradient stops the run (or, when skipping, this step) before the
  // optimizer touches the weights: the model stays as the last finite step left it.
  std::string problem;
  if (!std::isfinite(value)) {
    loss = Tensor();  // no backward: the step's graph is freed with the loss
    const std::string weight = first_nonfinite(flat_, flat_.values);
    problem = weight.empty() ? std::string("every weight is finite: the forward overflowed")
                             : fmt::format("parameter '{}' is not finite", weight);
  }
  ClipResult clip;
  if (problem.empty()) {
    backward(loss);
    if (step_ == nonfinite_test_step()) [[unlikely]]
      flat_.gradients.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    // With clipping the gradient norm is computed anyway: a non-finite gradient makes it
    // non-finite, and only then are the gradients searched for the first bad one.
    bool finite = true;
    if (config_.clip > 0) {
      clip = clip_grad_norm(flat_, config_.clip);
      finite = std::isfinite(clip.total_norm);
    }
    const std::string gradient =
        finite && config_.clip > 0 ? std::string() : first_nonfinite(flat_, flat_.gradients);
    if (!gradient.empty())
      problem = fmt::format("the gradient of '{}' is not finite", gradient);
    else if (!finite)
      problem = fmt::format("the gradient norm overflows ({})", clip.total_norm);
  }
  if (!problem.empty()) {
    flat_.zero_grad();
    return nonfinite_step(value, problem, start);
  }
  const double lr = config_.schedule.at(step_);
  optimizer_->step(lr);
  losses_.push_back(value);
  grad_norms_.push_back(clip.total_norm);
  clipped_ += clip.clipped ? 1 : 0;
  StepLog log{step_, config_.steps, value, clip.total_norm, clip.clipped, lr, 0, 0};
  log.skipped_steps = skipped_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.tokens_per_second =
      static_cast<double>(config_.batch * config_.model.seq_len) / std::max(log.seconds, 1e-9);
  ++step_;
  return log;
}

StepLog Trainer::nonfinite_step(double loss, const std::string& problem,
                                std::chrono::steady_clock::time_point start) {
  if (!skip_nonfinite_) throw TrainingDiverged(step_, loss, problem);
  ++skipped_;
  StepLog log{step_, config_.steps, loss, 0, false, config_.schedule.at(step_), 0, 0};
  log.skipped = true;
  log.skipped_steps = skipped_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++step_;
  return log;
}

double Trainer::wall_seconds() const {
  return prior_wall_seconds_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
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

void Trainer::save_checkpoint(const std::string& path) const {
  TrainingState state;
  state.metadata["depthgrad.kind"] = "training-checkpoint";
  state.metadata["depthgrad.config"] = json::dump(config_.to_json());
  state.metadata["depthgrad.step"] = std::to_string(step_);
  state.metadata["depthgrad.clipped_steps"] = std::to_string(clipped_);
  state.metadata["depthgrad.skipped_steps"] = std::to_string(skipped_);
  state.metadata["depthgrad.wall_seconds"] = fmt::format("{}", wall_seconds());
  state.metadata["depthgrad.data_position"] = std::to_string(loader_ ? loader_->position() : 0);
  state.blobs["batch_rng"] = batch_rng_.state();
  auto pack = [](const std::vector<double>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(double));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  state.blobs["losses"] = pack(losses_);
  state.blobs["grad_norms"] = pack(grad_norms_);
  state.metadata["depthgrad.global_batch"] = std::to_string(global_batch());
  if (!world_) return save_training_checkpoint(path, *model_, *optimizer_, state);
  std::unique_ptr<AdamW> full = zero1_ ? full_optimizer_state() : nullptr;  // collective
  if (world_->rank() == 0)
    save_training_checkpoint(path, *model_, full ? *full : *optimizer_, state);
  world_->barrier();  // complete on disk before any rank goes on
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
    // The global batch must agree; how it is split (ranks × accum × batch) may change on resume.
    const int64_t saved_global = checkpoint_global_batch(file, saved, path);
    if (saved_global != global_batch())
      throw std::runtime_error(fmt::format(
          "{}: the checkpoint's global batch {} differs from this run's global batch {} ({} "
          "rank(s) x 'training.accum' {} x 'training.batch' {})",
          path, saved_global, global_batch(), ranks(), config_.accum, config_.batch));
    for (auto [section, key] : {std::pair<const char*, const char*>{"model", nullptr},
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
  // The counts must agree with each other and with this run: a step past the run's last, more
  // clipped or skipped steps than steps, an optimizer that took another number of steps, or loss
  // records of another length all mean a file that was not written by this trainer as it stands.
  const int64_t step = count("depthgrad.step", config_.steps);
  const int64_t clipped = count("depthgrad.clipped_steps", step);
  const int64_t skipped =
      file.metadata.count("depthgrad.skipped_steps") ? count("depthgrad.skipped_steps", step) : 0;
  const int64_t taken = count("depthgrad.optimizer_step", step);
  if (taken != step - skipped)
    throw std::runtime_error(fmt::format(
        "{}: metadata 'depthgrad.optimizer_step' is {}, expected {} (step {} minus {} skipped)",
        path, taken, step - skipped, step, skipped));
  double wall = 0;
  if (file.metadata.count("depthgrad.wall_seconds")) {
    const std::string& text = meta("depthgrad.wall_seconds");
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), wall);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(wall) ||
        wall < 0)
      throw std::runtime_error(fmt::format(
          "{}: metadata 'depthgrad.wall_seconds' is '{}', expected a finite number >= 0", path,
          text));
  }
  const int64_t position =
      count("depthgrad.data_position", static_cast<int64_t>(train_ids_.size()));
  auto blob = [&](const char* key) -> const std::vector<uint8_t>& {
    const TensorEntry* e = file.find(std::string("state.") + key);
    if (!e) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
    if (e->dtype != "U8")
      throw std::runtime_error(fmt::format("{}: tensor 'state.{}' must be U8", path, key));
    return e->bytes;
  };
  for (const TensorEntry& e : file.tensors)
    if (e.name.rfind("state.", 0) == 0 && e.name != "state.batch_rng" && e.name != "state.losses" &&
        e.name != "state.grad_norms")
      throw std::runtime_error(
          fmt::format("{}: unexpected tensor '{}' (the trainer's state is state.batch_rng, "
                      "state.losses and state.grad_norms)",
                      path, e.name));
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
  for (auto [key, values] : {std::pair<const char*, const std::vector<double>*>{"losses", &losses},
                             {"grad_norms", &grad_norms}})
    if (static_cast<int64_t>(values->size()) != step - skipped)
      throw std::runtime_error(
          fmt::format("{}: 'state.{}' holds {} values, expected {} (one per step taken)", path, key,
                      values->size(), step - skipped));

  // ZeRO-1: the file holds the whole moments; this rank keeps its shard of them.
  std::unique_ptr<AdamW> full = zero1_ ? std::make_unique<AdamW>(flat_, config_.adamw) : nullptr;
  load_training_checkpoint(file, path, *model_, full ? *full : *optimizer_);
  if (full) take_optimizer_shard(*full);
  step_ = step;
  clipped_ = clipped;
  skipped_ = skipped;
  prior_wall_seconds_ = wall;
  started_ = std::chrono::steady_clock::now();
  if (loader_) loader_->set_position(position);
  batch_rng_ = batch_rng;
  losses_ = std::move(losses);
  grad_norms_ = std::move(grad_norms);
}

}  // namespace dg
