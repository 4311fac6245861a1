// The trainer's checkpoints (see trainer.h): what save_checkpoint writes beside the weights and
// the optimiser's state (the step, the counts, the sampler's and generator's states, the loss
// record, the schedule's state), and load_checkpoint's checks, each before anything changes.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

#include "tensor/rng.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train/training_config.h"

namespace dg {

json::Value Trainer::config_json() const {
  json::Value v;
  if (!model_config_.is_null()) v["model"] = model_config_;
  v["training"] = training_record_.is_null() ? training_config_json(config_) : training_record_;
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
// Metadata of the schedule's state: "depthgrad.scheduler.<name>".
const std::string kSchedulerPrefix = "depthgrad.scheduler.";

// The schedule's state a checkpoint holds, by name (empty for a rule of the step).
std::map<std::string, double> checkpoint_scheduler_state(const SafetensorsFile& file,
                                                         const std::string& path) {
  std::map<std::string, double> state;
  for (const auto& [key, text] : file.metadata) {
    if (key.rfind(kSchedulerPrefix, 0) != 0) continue;
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
      throw std::runtime_error(
          fmt::format("{}: metadata '{}' is '{}', not a number", path, key, text));
    state[key.substr(kSchedulerPrefix.size())] = value;
  }
  return state;
}
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
  // A schedule's own state (ReduceLROnPlateau's), in round-trip decimal; a rule of the step has
  // none.
  if (scheduler_)
    for (const auto& [key, value] : scheduler_->state())
      state.metadata[kSchedulerPrefix + key] = fmt::format("{}", value);
  if (!optimizer_->slot_groups().empty())
    state.metadata["depthgrad.optimizer_groups"] = json::dump(optimizer_groups_json());
  state.blobs["sampler"] = sampler_.state();
  state.blobs["generator"] = default_generator().state();
  state.blobs["losses"] = pack(losses_);
  state.blobs["grad_norms"] = pack(grad_norms_);
  const OptimizerState optimizer = full_optimizer_state();  // collective with ZeRO-1
  // The optimizer steps taken: an optimiser's scalar "step" when it has one (checked on resume).
  if (!optimizer.scalars.count("step"))
    state.metadata["depthgrad.optimizer_step"] = std::to_string(step_ - skipped_);
  // The model's persistent buffers (BatchNorm's running statistics) are saved with its weights.
  // Under data parallelism each rank normalises by its own micro-batch and updates its own running
  // statistics, as torch's DDP without SyncBatchNorm; depthgrad does not broadcast buffers (torch's
  // broadcast_buffers), so ranks' statistics differ and the checkpoint holds rank 0's, which every
  // rank loads on resume.
  if (!world_) return save_training_checkpoint(path, *model_, optimizer, state);
  if (world_->rank() == 0) save_training_checkpoint(path, *model_, optimizer, state);
  world_->barrier();  // complete on disk before any rank goes on
}

// The optimiser's parameter groups (made from groups): each group's weight decay and the names
// of its parameters; null when made from the module (one group).
json::Value Trainer::optimizer_groups_json() const {
  const std::vector<size_t>& slot_groups = optimizer_->slot_groups();
  if (slot_groups.empty()) return json::Value();
  std::vector<json::Value> groups(optimizer_->param_groups().size());
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g]["weight_decay"] = *optimizer_->param_groups()[g].weight_decay;
    groups[g]["parameters"] = json::Value(json::Array{});
  }
  for (size_t s = 0; s < slot_groups.size(); ++s)
    if (slot_groups[s] != SIZE_MAX)
      groups[slot_groups[s]]["parameters"].as_array().push_back(json::Value(flat_.slots[s].name));
  json::Value all = json::Value(json::Array{});
  for (json::Value& g : groups) all.as_array().push_back(std::move(g));
  return all;
}

OptimizerState Trainer::full_optimizer_state() const {
  OptimizerState state = optimizer_state(*optimizer_);
  if (!sharded_) return state;
  // Only rank 0 holds the whole (transiently).
  for (auto& [name, tensor] : state.elements) {
    Tensor full = world_->rank() == 0 ? Tensor::zeros({flat_.total}, DType::f32) : Tensor();
    world_->gather_to_root(tensor.data<float>(), full.defined() ? full.data<float>() : nullptr,
                           shard_bounds_);
    tensor = full;
  }
  return state;
}

namespace {
// Metadata `key` of a training checkpoint, or an error naming the file and the key.
const std::string& checkpoint_metadata(const SafetensorsFile& file, const std::string& path,
                                       const char* key) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end())
    throw std::runtime_error(fmt::format(
        "{}: metadata '{}' is missing (not a depthgrad training checkpoint?)", path, key));
  return it->second;
}

// Refuses a checkpoint of another model or run before anything changes: the caller's model
// config, the global batch (its split over ranks × accum × batch may change), the seed, the matmul
// precision (absent means float32), the caller's extra resume keys and the data stream.
void check_checkpoint_matches(const SafetensorsFile& file, const std::string& path,
                              const Trainer& trainer, const std::vector<std::string>& resume_keys) {
  json::Value saved = json::parse(checkpoint_metadata(file, path, "depthgrad.config"),
                                  path + " (depthgrad.config)");
  json::Value mine = trainer.config_json();
  auto field = [](const json::Value& config, const char* section,
                  const char* key) -> const json::Value* {
    const json::Value* s = config.is_object() ? config.find(section) : nullptr;
    return s && s->is_object() ? (key ? s->find(key) : s) : s;
  };
  // The global batch must agree; how it is split (ranks × accum × batch) may change on resume.
  const int64_t saved_global = checkpoint_global_batch(file, saved, path);
  if (saved_global != trainer.global_batch())
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint's global batch {} differs from this run's global batch {} ({} "
        "rank(s) x 'training.accum' {} x 'training.batch' {})",
        path, saved_global, trainer.global_batch(), trainer.ranks(), trainer.config().accum,
        trainer.config().batch));
  // The matmul precision too (absent means float32): a run resumed in another precision
  // would not continue the run's bits.
  const json::Value float32 = json::Value("float32");
  std::vector<std::pair<const char*, const char*>> keys{
      {"model", nullptr}, {"training", "seed"}, {"training", "precision"}};
  for (const std::string& key : resume_keys) keys.emplace_back("training", key.c_str());
  for (auto [section, key] : keys) {
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
  const json::Value stream = json::parse(checkpoint_metadata(file, path, "depthgrad.sampler"),
                                         path + " (depthgrad.sampler)");
  if (!(stream == trainer.sampler().description()))
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint's data stream {} differs from this run's {} (another dataset, "
        "sampler or seed)",
        path, json::dump(stream), json::dump(trainer.sampler().description())));
}
}  // namespace

namespace {
// A whole-string integer in [0, max] of metadata `key`.
int64_t metadata_count(const SafetensorsFile& file, const std::string& path, const char* key,
                       int64_t max) {
  const std::string& text = checkpoint_metadata(file, path, key);
  int64_t value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > max)
    throw std::runtime_error(fmt::format(
        "{}: metadata '{}' is '{}', expected an integer in [0, {}]", path, key, text, max));
  return value;
}

// The trainer's own state in a checkpoint, read and checked before anything changes.
struct LoopState {
  LoopState(const Sampler& sampler, const TorchGenerator& generator)
      : sampler(sampler), generator(generator) {}
  int64_t step = 0, clipped = 0, skipped = 0;
  double wall_seconds = 0;
  Sampler sampler;
  TorchGenerator generator;
  std::vector<double> losses, grad_norms;
  std::map<std::string, double> schedule_state;
};

// The counts must agree with each other and with this run: a step past the run's last, more
// clipped or skipped steps than steps, an optimizer that took another number of steps all mean
// a file that was not written by this trainer as it stands.
void read_counts(const SafetensorsFile& file, const std::string& path, int64_t steps,
                 LoopState& loop) {
  loop.step = metadata_count(file, path, "depthgrad.step", steps);
  loop.clipped = metadata_count(file, path, "depthgrad.clipped_steps", loop.step);
  loop.skipped = metadata_count(file, path, "depthgrad.skipped_steps", loop.step);
  const int64_t taken = metadata_count(file, path, "depthgrad.optimizer_step", loop.step);
  if (taken != loop.step - loop.skipped)
    throw std::runtime_error(fmt::format(
        "{}: metadata 'depthgrad.optimizer_step' is {}, expected {} (step {} minus {} skipped)",
        path, taken, loop.step - loop.skipped, loop.step, loop.skipped));
  const std::string& text = checkpoint_metadata(file, path, "depthgrad.wall_seconds");
  double& wall = loop.wall_seconds;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), wall);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(wall) || wall < 0)
    throw std::runtime_error(
        fmt::format("{}: metadata 'depthgrad.wall_seconds' is '{}', expected a finite number >= 0",
                    path, text));
}

// Tensor "state.<key>": bytes (U8).
const std::vector<uint8_t>& state_blob(const SafetensorsFile& file, const std::string& path,
                                       const char* key) {
  const TensorEntry* e = file.find(std::string("state.") + key);
  if (!e) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
  if (e->dtype != "U8")
    throw std::runtime_error(fmt::format("{}: tensor 'state.{}' must be U8", path, key));
  return e->bytes;
}

// Tensor "state.<key>" as doubles.
std::vector<double> unpack(const SafetensorsFile& file, const std::string& path, const char* key) {
  const std::vector<uint8_t>& b = state_blob(file, path, key);
  if (b.size() % sizeof(double) != 0)
    throw std::runtime_error(fmt::format(
        "{}: 'state.{}' has {} bytes, not a whole number of doubles", path, key, b.size()));
  std::vector<double> v(b.size() / sizeof(double));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());  // data() may be null when empty
  return v;
}

// The trainer's tensors: only kStateBlobs; the sampler's and generator's states, and one loss and
// one gradient norm per step taken.
void read_state_tensors(const SafetensorsFile& file, const std::string& path, LoopState& loop) {
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("state.", 0) != 0) continue;
    const std::string key = e.name.substr(6);
    if (std::find(std::begin(kStateBlobs), std::end(kStateBlobs), key) == std::end(kStateBlobs))
      throw std::runtime_error(fmt::format(
          "{}: unexpected tensor '{}' (the trainer's state is state.sampler, state.generator, "
          "state.losses and state.grad_norms)",
          path, e.name));
  }
  try {
    loop.sampler.set_state(state_blob(file, path, "sampler"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.sampler': {}", path, e.what()));
  }
  try {
    loop.generator.set_state(state_blob(file, path, "generator"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.generator': {}", path, e.what()));
  }
  loop.losses = unpack(file, path, "losses");
  loop.grad_norms = unpack(file, path, "grad_norms");
  for (auto [key, values] :
       {std::pair<const char*, const std::vector<double>*>{"losses", &loop.losses},
        {"grad_norms", &loop.grad_norms}})
    if (static_cast<int64_t>(values->size()) != loop.step - loop.skipped)
      throw std::runtime_error(
          fmt::format("{}: 'state.{}' holds {} values, expected {} (one per step taken)", path, key,
                      values->size(), loop.step - loop.skipped));
}

// All of the trainer's own state, checked; `sampler` and `generator` are the run's (the file's
// states are set on copies of them).
LoopState read_loop_state(const SafetensorsFile& file, const std::string& path, int64_t steps,
                          const Sampler& sampler, const TorchGenerator& generator,
                          bool has_scheduler) {
  LoopState loop(sampler, generator);
  read_counts(file, path, steps, loop);
  read_state_tensors(file, path, loop);
  loop.schedule_state = checkpoint_scheduler_state(file, path);
  if (!has_scheduler && !loop.schedule_state.empty())
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint holds a learning-rate schedule's state ('{}'), this run has no "
        "schedule",
        path, loop.schedule_state.begin()->first));
  return loop;
}
}  // namespace

void Trainer::check_optimizer_groups(const SafetensorsFile& file, const std::string& path) const {
  auto it = file.metadata.find("depthgrad.optimizer_groups");
  const json::Value saved = it == file.metadata.end()
                                ? json::Value()
                                : json::parse(it->second, path + " (depthgrad.optimizer_groups)");
  const json::Value mine = optimizer_groups_json();
  if (!(saved == mine))
    throw std::runtime_error(
        fmt::format("{}: the checkpoint's optimizer parameter groups {} differ from this run's {}",
                    path, saved.is_null() ? "(one group, made from the module)" : json::dump(saved),
                    mine.is_null() ? "(one group, made from the module)" : json::dump(mine)));
}

// The optimizer's state is read into tensors over the whole flat buffer (its own when unsharded;
// with ZeRO-1 this rank then keeps its shard of them). The schedule's state first (it checks
// every value before it changes any); restored if the model's or the optimiser's part is refused.
void Trainer::load_weights_and_optimizer(const SafetensorsFile& file, const std::string& path,
                                         const std::map<std::string, double>& schedule_state) {
  OptimizerState optimizer = optimizer_state(*optimizer_);
  std::vector<Tensor> shards;
  if (sharded_)
    for (auto& [name, tensor] : optimizer.elements) {
      shards.push_back(tensor);
      tensor = Tensor::zeros({flat_.total}, tensor.dtype());
    }
  const std::map<std::string, double> schedule_before =
      scheduler_ ? scheduler_->state() : std::map<std::string, double>{};
  if (scheduler_) {
    try {
      scheduler_->load_state(schedule_state);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
    }
  }
  try {
    load_training_checkpoint(file, path, *model_, optimizer);
  } catch (...) {
    if (scheduler_) scheduler_->load_state(schedule_before);
    throw;
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t lo = optimizer_->shard_begin(), count = shards[i].numel();
    std::memcpy(shards[i].mutable_data<float>(), optimizer.elements[i].second.data<float>() + lo,
                static_cast<size_t>(count) * sizeof(float));
  }
  optimizer_->set_scalar_state(optimizer.scalars);
}

// Every part is checked before anything changes: a checkpoint of another model or run, or one
// whose counts or state do not hold together, leaves the trainer as it was
// (load_training_checkpoint checks all of its part before copying).
void Trainer::load_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);  // read once: checked here, applied below
  check_checkpoint_matches(file, path, *this, resume_keys_);
  check_optimizer_groups(file, path);
  LoopState loop = read_loop_state(file, path, config_.steps, sampler_, default_generator(),
                                   scheduler_ != nullptr);
  load_weights_and_optimizer(file, path, loop.schedule_state);
  if (scheduler_) scheduler_->set_step(loop.step);
  step_ = loop.step;
  clipped_ = loop.clipped;
  skipped_ = loop.skipped;
  prior_wall_seconds_ = loop.wall_seconds;
  started_ = std::chrono::steady_clock::now();
  sampler_ = loop.sampler;
  default_generator() = loop.generator;
  losses_ = std::move(loop.losses);
  grad_norms_ = std::move(loop.grad_norms);
}

}  // namespace dg
