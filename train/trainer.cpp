// The resumable training loop of any Module (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "autograd/tape.h"
#include "tensor/rng.h"
#include "train/checkpoint.h"

namespace dg {

TrainingDiverged::TrainingDiverged(int64_t step_, double loss_, const std::string& problem)
    : std::runtime_error(
          fmt::format("training diverged at step {} (0-based): loss {}, {}; stopped before the "
                      "optimizer step (--skip-nonfinite skips such steps instead)",
                      step_, loss_, problem)),
      step(step_),
      loss(loss_) {}

// ---- the loop

Trainer::Trainer(Module& model, const Dataset& data, Sampler sampler, LossFunction loss,
                 const TrainingConfig& config, json::Value model_config, Collectives* world)
    : Trainer(TrainingSetup{std::shared_ptr<Module>(std::shared_ptr<Module>(), &model),
                            std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &data),
                            std::move(sampler), std::move(loss), std::move(model_config), world},
              config) {}

Trainer::Trainer(TrainingSetup s, const TrainingConfig& config)
    : model_(std::move(s.model)),
      data_(std::move(s.data)),
      sampler_(std::move(s.sampler)),
      loss_(std::move(s.loss)),
      model_config_(std::move(s.config)),
      config_(config),
      world_(s.world) {
  if (!model_) throw std::invalid_argument("trainer: the model is null");
  if (!data_) throw std::invalid_argument("trainer: the dataset is null");
  if (!loss_) throw std::invalid_argument("trainer: no loss function given");
  if (world_ && world_->size() == 1) world_ = nullptr;  // a group of one is one process
  if (config_.accum < 1)
    throw std::invalid_argument(fmt::format("trainer: accum must be >= 1, got {}", config_.accum));
  if (config_.batch < 1)
    throw std::invalid_argument(fmt::format("trainer: batch must be >= 1, got {}", config_.batch));
  if (config_.steps < 0)
    throw std::invalid_argument(fmt::format("trainer: steps must be >= 0, got {}", config_.steps));
  if (sampler_.size() != data_->size())
    throw std::invalid_argument(
        fmt::format("trainer: the sampler covers {} examples, the dataset has {}", sampler_.size(),
                    data_->size()));
  check_precision_supported(config_.precision, "trainer: training.precision");
  zero1_ = config_.zero == 1 && world_;
  flat_ = flatten_parameters(*model_);
  if (flat_.total == 0) throw std::invalid_argument("trainer: the model has no parameters");
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
  return dispatch_float(buffer.dtype(), "trainer", [&]<class T>() -> std::string {
    const T* data = buffer.data<T>();
    for (const FlatParameters::Slot& slot : flat.slots)
      for (int64_t i = 0; i < slot.numel; ++i)
        if (!std::isfinite(data[slot.offset + i])) return slot.name;
    return "";
  });
}
}  // namespace

StepLog Trainer::train_step() {
  MatmulPrecisionScope precision(config_.precision);
  if (accumulates()) return accumulated_step();
  const auto start = std::chrono::steady_clock::now();
  sampler_.next(config_.batch, step_indices_);
  data_->fill(step_indices_, batch_);
  flat_.zero_grad();
  Tensor loss = loss_(*model_, batch_);
  if (!loss.defined() || loss.numel() != 1)
    throw std::invalid_argument(
        fmt::format("trainer: the loss function returned {}, expected one value",
                    loss.defined() ? loss.describe() : std::string("an undefined tensor")));
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
      dispatch_float(flat_.gradients.dtype(), "trainer", [&]<class T>() {
        flat_.gradients.data<T>()[0] = std::numeric_limits<T>::quiet_NaN();
      });
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
  return finished_step(value, clip, lr, start);
}

StepLog Trainer::finished_step(double loss, const ClipResult& clip, double lr,
                               std::chrono::steady_clock::time_point start) {
  losses_.push_back(loss);
  grad_norms_.push_back(clip.total_norm);
  clipped_ += clip.clipped ? 1 : 0;
  StepLog log{step_, config_.steps, loss, clip.total_norm, clip.clipped, lr, 0, 0};
  log.skipped_steps = skipped_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.tokens_per_second = static_cast<double>(global_batch() * data_->tokens_per_example()) /
                          std::max(log.seconds, 1e-9);
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

double evaluate_loss(Module& model, const Dataset& data, const LossFunction& loss, int64_t batch) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double sum = 0;
  for_each_batch(data, batch, [&](const Batch& b) {
    sum += loss(model, b).item() * static_cast<double>(b.size());
  });
  model.train(was_training);
  return sum / static_cast<double>(data.size());
}

// ---- checkpoints

json::Value Trainer::config_json() const {
  json::Value v;
  if (!model_config_.is_null()) v["model"] = model_config_;
  v["training"] = training_json(config_);
  return v;
}

namespace {
std::vector<uint8_t> pack(const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(double));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
// The trainer's own tensors in a checkpoint ("state.<name>").
constexpr const char* kStateBlobs[] = {"sampler", "generator", "losses", "grad_norms"};
}  // namespace

void Trainer::save_checkpoint(const std::string& path,
                              const std::map<std::string, std::string>& metadata) const {
  TrainingState state;
  for (const auto& [key, value] : metadata) {
    if (key.rfind("depthgrad.", 0) == 0)
      throw std::invalid_argument(fmt::format(
          "{}: metadata key '{}' is the trainer's own (keys starting 'depthgrad.' are reserved)",
          path, key));
    state.metadata[key] = value;
  }
  state.metadata["depthgrad.kind"] = "training-checkpoint";
  state.metadata["depthgrad.config"] = json::dump(config_json());
  state.metadata["depthgrad.sampler"] = json::dump(sampler_.description());
  state.metadata["depthgrad.step"] = std::to_string(step_);
  state.metadata["depthgrad.clipped_steps"] = std::to_string(clipped_);
  state.metadata["depthgrad.skipped_steps"] = std::to_string(skipped_);
  state.metadata["depthgrad.wall_seconds"] = fmt::format("{}", wall_seconds());
  state.metadata["depthgrad.global_batch"] = std::to_string(global_batch());
  state.blobs["sampler"] = sampler_.state();
  state.blobs["generator"] = default_generator().state();
  state.blobs["losses"] = pack(losses_);
  state.blobs["grad_norms"] = pack(grad_norms_);
  if (!world_) return save_training_checkpoint(path, *model_, *optimizer_, state);
  std::unique_ptr<AdamW> full = zero1_ ? full_optimizer_state() : nullptr;  // collective
  if (world_->rank() == 0)
    save_training_checkpoint(path, *model_, full ? *full : *optimizer_, state);
  world_->barrier();  // complete on disk before any rank goes on
}

void Trainer::load_checkpoint(const std::string& path) {
  // Check the config before touching anything: a checkpoint of another model or run is refused.
  SafetensorsFile file = load_safetensors(path);  // read once: checked here, applied below
  auto meta = [&](const char* key) -> const std::string& {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      throw std::runtime_error(fmt::format(
          "{}: metadata '{}' is missing (not a depthgrad training checkpoint?)", path, key));
    return it->second;
  };
  {
    json::Value saved = json::parse(meta("depthgrad.config"), path + " (depthgrad.config)");
    json::Value mine = config_json();
    auto field = [](const json::Value& config, const char* section,
                    const char* key) -> const json::Value* {
      const json::Value* s = config.is_object() ? config.find(section) : nullptr;
      return s && s->is_object() ? (key ? s->find(key) : s) : s;
    };
    // The global batch must agree; how it is split (ranks × accum × batch) may change on resume.
    const int64_t saved_global = checkpoint_global_batch(file, saved, path);
    if (saved_global != global_batch())
      throw std::runtime_error(fmt::format(
          "{}: the checkpoint's global batch {} differs from this run's global batch {} ({} "
          "rank(s) x 'training.accum' {} x 'training.batch' {})",
          path, saved_global, global_batch(), ranks(), config_.accum, config_.batch));
    // The matmul precision too (absent means float32): a run resumed in another precision
    // would not continue the run's bits.
    const json::Value float32 = json::Value("float32");
    for (auto [section, key] : {std::pair<const char*, const char*>{"model", nullptr},
                                {"training", "seed"},
                                {"training", "sequential"},
                                {"training", "init"},
                                {"training", "precision"}}) {
      const bool precision = key && std::string_view(key) == "precision";
      const json::Value* s = field(saved, section, key);
      const json::Value* m = field(mine, section, key);
      if (precision && !s) s = &float32;
      if (precision && !m) m = &float32;
      const std::string name = key ? fmt::format("{}.{}", section, key) : section;
      if ((s != nullptr) != (m != nullptr) || (s && !(*s == *m)))
        throw std::runtime_error(
            fmt::format("{}: the checkpoint's '{}' ({}) differs from this run's ({})", path, name,
                        s ? json::dump(*s) : "missing", m ? json::dump(*m) : "missing"));
    }
    const json::Value stream =
        json::parse(meta("depthgrad.sampler"), path + " (depthgrad.sampler)");
    if (!(stream == sampler_.description()))
      throw std::runtime_error(fmt::format(
          "{}: the checkpoint's data stream {} differs from this run's {} (another dataset, "
          "sampler or seed)",
          path, json::dump(stream), json::dump(sampler_.description())));
  }
  // The trainer's own state is read and checked before anything changes, so a bad checkpoint
  // leaves the trainer as it was (load_training_checkpoint checks all of its part before copying).
  // A whole-string integer in [0, max].
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
  const int64_t skipped = count("depthgrad.skipped_steps", step);
  const int64_t taken = count("depthgrad.optimizer_step", step);
  if (taken != step - skipped)
    throw std::runtime_error(fmt::format(
        "{}: metadata 'depthgrad.optimizer_step' is {}, expected {} (step {} minus {} skipped)",
        path, taken, step - skipped, step, skipped));
  double wall = 0;
  {
    const std::string& text = meta("depthgrad.wall_seconds");
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), wall);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(wall) ||
        wall < 0)
      throw std::runtime_error(fmt::format(
          "{}: metadata 'depthgrad.wall_seconds' is '{}', expected a finite number >= 0", path,
          text));
  }
  auto blob = [&](const char* key) -> const std::vector<uint8_t>& {
    const TensorEntry* e = file.find(std::string("state.") + key);
    if (!e) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
    if (e->dtype != "U8")
      throw std::runtime_error(fmt::format("{}: tensor 'state.{}' must be U8", path, key));
    return e->bytes;
  };
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("state.", 0) != 0) continue;
    const std::string key = e.name.substr(6);
    if (std::find(std::begin(kStateBlobs), std::end(kStateBlobs), key) == std::end(kStateBlobs))
      throw std::runtime_error(fmt::format(
          "{}: unexpected tensor '{}' (the trainer's state is state.sampler, state.generator, "
          "state.losses and state.grad_norms)",
          path, e.name));
  }
  Sampler sampler = sampler_;
  TorchGenerator generator = default_generator();
  try {
    sampler.set_state(blob("sampler"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.sampler': {}", path, e.what()));
  }
  try {
    generator.set_state(blob("generator"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.generator': {}", path, e.what()));
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
  sampler_ = sampler;
  default_generator() = generator;
  losses_ = std::move(losses);
  grad_norms_ = std::move(grad_norms);
}

}  // namespace dg
