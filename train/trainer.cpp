// The resumable training loop (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "autograd/tape.h"
#include "train/checkpoint.h"

namespace dg {

InitScheme parse_init_scheme(const std::string& text) {
  if (text == "parity") return InitScheme::parity;
  if (text == "identical") return InitScheme::identical;
  throw std::invalid_argument(fmt::format("unknown init '{}' (expected parity or identical)", text));
}
const char* init_scheme_name(InitScheme s) { return s == InitScheme::parity ? "parity" : "identical"; }

// ---- config <-> JSON ------------------------------------------------------------------------------------

json::Value TrainerConfig::to_json() const {
  json::Value m;
  m["vocab"] = model.vocab;
  m["dim"] = model.dim;
  m["layers"] = model.layers;
  m["heads"] = model.heads;
  m["kv_heads"] = model.kv_heads;
  m["seq_len"] = model.seq_len;
  m["expansion"] = model.expansion;
  m["mode"] = residual_mode_name(model.mode);
  m["norm"] = model.norm == Norm::Kind::rms ? "rms" : "layer";
  m["norm_eps"] = model.norm_eps;
  m["ffn"] = model.ffn == FeedForward::Kind::swiglu ? "swiglu" : "gelu";
  m["rope"] = model.rope;
  m["bias"] = model.bias;
  m["learned_positions"] = model.learned_positions;
  m["tied_head"] = model.tied_head;
  m["attnres_block_size"] = model.attnres_block_size;
  json::Value v;
  v["model"] = m;
  v["steps"] = steps;
  v["batch"] = batch;
  v["clip"] = clip;
  v["lr"] = adamw.lr;
  v["beta1"] = adamw.beta1;
  v["beta2"] = adamw.beta2;
  v["eps"] = adamw.eps;
  v["weight_decay"] = adamw.weight_decay;
  v["decay"] = adamw.decay == DecayPolicy::all ? "all" : "matrices";
  v["schedule"] = schedule.kind == Schedule::Kind::constant ? "constant" : "cosine";
  v["warmup"] = schedule.warmup_steps;
  v["min_lr_ratio"] = schedule.min_lr_ratio;
  v["init"] = init_scheme_name(init);
  v["seed"] = static_cast<int64_t>(seed);
  v["sequential"] = sequential;
  v["accum"] = accum;
  return v;
}

TrainerConfig TrainerConfig::from_json(const json::Value& v, const std::string& source) {
  TrainerConfig c;
  auto field = [&](const json::Value& obj, const char* key) -> const json::Value* { return obj.find(key); };
  auto wrap = [&](const char* key, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format("{}: field '{}': {}", source, key, e.what()));
    }
  };
  if (!v.is_object()) throw std::invalid_argument(fmt::format("{}: a training config must be a JSON object", source));
  static const char* known[] = {"model", "steps", "batch", "clip", "lr", "beta1", "beta2", "eps", "weight_decay", "decay",
                                "schedule", "warmup", "min_lr_ratio", "init", "seed", "sequential", "accum"};
  for (auto& [key, value] : v.as_object()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) throw std::invalid_argument(fmt::format("{}: unknown field '{}'", source, key));
  }
  if (const json::Value* m = field(v, "model")) {
    static const char* model_known[] = {"vocab", "dim", "layers", "heads", "kv_heads", "seq_len", "expansion", "mode", "norm",
                                        "norm_eps", "ffn", "rope", "bias", "learned_positions", "tied_head", "attnres_block_size"};
    for (auto& [key, value] : m->as_object()) {
      bool ok = false;
      for (const char* k : model_known) ok = ok || key == k;
      if (!ok) throw std::invalid_argument(fmt::format("{}: unknown field 'model.{}'", source, key));
    }
    auto get_int = [&](const char* key, int64_t& out) { if (auto* x = m->find(key)) wrap(key, [&] { out = x->as_int(); }); };
    auto get_bool = [&](const char* key, bool& out) { if (auto* x = m->find(key)) wrap(key, [&] { out = x->as_bool(); }); };
    get_int("vocab", c.model.vocab);
    get_int("dim", c.model.dim);
    get_int("layers", c.model.layers);
    get_int("heads", c.model.heads);
    c.model.kv_heads = c.model.heads;
    get_int("kv_heads", c.model.kv_heads);
    get_int("seq_len", c.model.seq_len);
    get_int("expansion", c.model.expansion);
    get_int("attnres_block_size", c.model.attnres_block_size);
    get_bool("rope", c.model.rope);
    get_bool("bias", c.model.bias);
    get_bool("learned_positions", c.model.learned_positions);
    get_bool("tied_head", c.model.tied_head);
    if (auto* x = m->find("norm_eps")) wrap("model.norm_eps", [&] { c.model.norm_eps = x->as_double(); });
    if (auto* x = m->find("mode")) wrap("model.mode", [&] { c.model.mode = parse_residual_mode(x->as_string()); });
    if (auto* x = m->find("norm"))
      wrap("model.norm", [&] {
        const std::string& s = x->as_string();
        if (s != "rms" && s != "layer") throw std::invalid_argument("expected rms or layer, got '" + s + "'");
        c.model.norm = s == "rms" ? Norm::Kind::rms : Norm::Kind::layer;
      });
    if (auto* x = m->find("ffn"))
      wrap("model.ffn", [&] {
        const std::string& s = x->as_string();
        if (s != "swiglu" && s != "gelu") throw std::invalid_argument("expected swiglu or gelu, got '" + s + "'");
        c.model.ffn = s == "swiglu" ? FeedForward::Kind::swiglu : FeedForward::Kind::gelu;
      });
    try {
      c.model.validate();
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format("{}: {}", source, e.what()));
    }
  }
  if (auto* x = field(v, "steps")) wrap("steps", [&] { c.steps = x->as_int(); });
  if (auto* x = field(v, "batch")) wrap("batch", [&] { c.batch = x->as_int(); });
  if (auto* x = field(v, "clip")) wrap("clip", [&] { c.clip = x->as_double(); });
  if (auto* x = field(v, "lr")) wrap("lr", [&] { c.adamw.lr = x->as_double(); });
  if (auto* x = field(v, "beta1")) wrap("beta1", [&] { c.adamw.beta1 = x->as_double(); });
  if (auto* x = field(v, "beta2")) wrap("beta2", [&] { c.adamw.beta2 = x->as_double(); });
  if (auto* x = field(v, "eps")) wrap("eps", [&] { c.adamw.eps = x->as_double(); });
  if (auto* x = field(v, "weight_decay")) wrap("weight_decay", [&] { c.adamw.weight_decay = x->as_double(); });
  if (auto* x = field(v, "decay")) wrap("decay", [&] { c.adamw.decay = parse_decay_policy(x->as_string()); });
  std::string schedule = "constant";
  int64_t warmup = 0;
  if (auto* x = field(v, "schedule")) wrap("schedule", [&] { schedule = x->as_string(); });
  if (auto* x = field(v, "warmup")) wrap("warmup", [&] { warmup = x->as_int(); });
  wrap("schedule", [&] { c.schedule = Schedule::parse(schedule, c.adamw.lr, warmup, c.steps); });
  if (auto* x = field(v, "min_lr_ratio")) wrap("min_lr_ratio", [&] { c.schedule.min_lr_ratio = x->as_double(); });
  if (auto* x = field(v, "init")) wrap("init", [&] { c.init = parse_init_scheme(x->as_string()); });
  if (auto* x = field(v, "seed"))
    wrap("seed", [&] {
      int64_t s = x->as_int();
      if (s < 0) throw std::invalid_argument("must be >= 0");
      c.seed = static_cast<uint64_t>(s);
    });
  if (auto* x = field(v, "sequential")) wrap("sequential", [&] { c.sequential = x->as_bool(); });
  if (auto* x = field(v, "accum")) wrap("accum", [&] { c.accum = x->as_int(); });
  if (c.accum < 1) throw std::invalid_argument(fmt::format("{}: accum must be >= 1", source));
  if (c.steps < 1 || c.batch < 1) throw std::invalid_argument(fmt::format("{}: steps and batch must be >= 1", source));
  return c;
}

// ---- the loop ---------------------------------------------------------------------------------------------

Trainer::Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids)
    : Trainer(config, train_ids, nullptr, false) {}

Trainer::Trainer(const TrainerConfig& config, const std::vector<int32_t>& train_ids, Collectives* world, bool zero1)
    : config_(config), train_ids_(train_ids), batch_rng_(config.seed), world_(world), zero1_(zero1) {
  if (world_ && world_->size() == 1) world_ = nullptr;  // a group of one is one process
  if (config_.accum < 1) throw std::invalid_argument(fmt::format("trainer: accum must be >= 1, got {}", config_.accum));
  config_.model.validate();
  // §1.4 order: model (init from the seed), optimizer, then the batch RNG.
  model_ = std::make_unique<MicroLM>(config_.model, DType::f32);
  if (config_.init == InitScheme::parity) model_->init_torch_parity(config_.seed);
  else model_->init_identical(config_.seed);
  flat_ = flatten_parameters(*model_);
  if (accumulates()) setup_data_parallel();  // shard bounds; ZeRO-1 keeps only this rank's moments
  if (zero1_ && world_) optimizer_ = std::make_unique<AdamW>(flat_, config_.adamw, shard_bounds_[world_->rank()], shard_bounds_[world_->rank() + 1]);
  else optimizer_ = std::make_unique<AdamW>(flat_, config_.adamw);
  // The parameters' first buffers (replaced by views into the flat buffer) and init's scratch
  // sit in the storage cache in sizes the steps never ask for: give them back to the system.
  storage_cache_clear();
  config_.schedule.lr = config_.adamw.lr;
  if (config_.sequential) loader_ = std::make_unique<SequentialLoader>(train_ids_, global_batch(), config_.model.seq_len);
}

int64_t Trainer::global_batch() const { return ranks() * config_.accum * config_.batch; }

StepLog Trainer::train_step() {
  if (accumulates()) return accumulated_step();
  const auto start = std::chrono::steady_clock::now();
  if (loader_) loader_->next(batch_);
  else sample_lm_batch(batch_rng_, train_ids_, config_.batch, config_.model.seq_len, batch_);
  flat_.zero_grad();
  Tensor loss = model_->loss(batch_.inputs, batch_.targets);
  backward(loss);
  ClipResult clip = config_.clip > 0 ? clip_grad_norm(flat_, config_.clip) : ClipResult{};
  const double lr = config_.schedule.at(step_);
  optimizer_->step(lr);
  const double value = loss.item();
  if (!std::isfinite(value))
    throw std::runtime_error(fmt::format("training diverged: loss is {} at step {}", value, step_));
  losses_.push_back(value);
  grad_norms_.push_back(clip.total_norm);
  clipped_ += clip.clipped ? 1 : 0;
  StepLog log{step_, config_.steps, value, clip.total_norm, clip.clipped, lr, 0, 0};
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.tokens_per_second = static_cast<double>(config_.batch * config_.model.seq_len) / std::max(log.seconds, 1e-9);
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

// ---- checkpoints ----------------------------------------------------------------------------------------------

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
  state.metadata["depthgrad.global_batch"] = std::to_string(global_batch());
  if (!world_) return save_training_checkpoint(path, *model_, *optimizer_, state);
  std::unique_ptr<AdamW> full = zero1_ ? full_optimizer_state() : nullptr;  // collective
  if (world_->rank() == 0) save_training_checkpoint(path, *model_, full ? *full : *optimizer_, state);
  world_->barrier();  // complete on disk before any rank goes on
}

void Trainer::load_checkpoint(const std::string& path) {
  // Check the config before touching anything: a checkpoint of another model or run is refused.
  SafetensorsFile file = load_safetensors(path);  // read once: checked here, applied below
  {
    auto it = file.metadata.find("depthgrad.config");
    if (it == file.metadata.end())
      throw std::runtime_error(fmt::format("{}: metadata 'depthgrad.config' is missing (not a depthgrad training checkpoint)", path));
    json::Value saved = json::parse(it->second, path + " (depthgrad.config)");
    json::Value mine = config_.to_json();
    // The global batch must agree; how it is split (ranks × accum × batch) may change on resume.
    const json::Value* saved_batch = saved.find("batch");
    const json::Value* saved_accum = saved.find("accum");
    int64_t saved_global = saved_batch && saved_batch->is_number() ? saved_batch->as_int() * (saved_accum ? saved_accum->as_int() : 1) : -1;
    if (auto g = file.metadata.find("depthgrad.global_batch"); g != file.metadata.end()) saved_global = std::stoll(g->second);
    if (saved_global != global_batch())
      throw std::runtime_error(fmt::format("{}: the checkpoint's 'batch' (global batch {}) differs from this run's (global batch {} = {} rank(s) x accum {} x batch {})",
                                           path, saved_global, global_batch(), ranks(), config_.accum, config_.batch));
    for (const char* key : {"model", "seed", "sequential", "init"}) {
      const json::Value* s = saved.find(key);
      if (!s || !(*s == mine.at(key)))
        throw std::runtime_error(fmt::format("{}: the checkpoint's '{}' ({}) differs from this run's ({})", path, key,
                                             s ? json::dump(*s) : "missing", json::dump(mine.at(key))));
    }
  }
  std::unique_ptr<AdamW> full = zero1_ && world_ ? std::make_unique<AdamW>(flat_, config_.adamw) : nullptr;
  TrainingState state = load_training_checkpoint(file, path, *model_, full ? *full : *optimizer_);
  if (full) take_optimizer_shard(*full);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = state.metadata.find(key);
    if (it == state.metadata.end()) throw std::runtime_error(fmt::format("{}: metadata '{}' is missing", path, key));
    return it->second;
  };
  try {
    step_ = std::stoll(meta("depthgrad.step"));
    clipped_ = std::stoll(meta("depthgrad.clipped_steps"));
    if (loader_) loader_->set_position(std::stoll(meta("depthgrad.data_position")));
  } catch (const std::invalid_argument&) {
    throw std::runtime_error(fmt::format("{}: step metadata is not a number", path));
  }
  auto blob = [&](const char* key) -> const std::vector<uint8_t>& {
    auto it = state.blobs.find(key);
    if (it == state.blobs.end()) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
    return it->second;
  };
  batch_rng_.set_state(blob("batch_rng"));
  auto unpack = [&](const std::vector<uint8_t>& b, const char* key) {
    if (b.size() % sizeof(double) != 0) throw std::runtime_error(fmt::format("{}: 'state.{}' has a bad size", path, key));
    std::vector<double> v(b.size() / sizeof(double));
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  losses_ = unpack(blob("losses"), "losses");
  grad_norms_ = unpack(blob("grad_norms"), "grad_norms");
}

}  // namespace dg
