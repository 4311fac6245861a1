// The run configuration, its checks, its one JSON mapping and its presets (see run_config.h).
#include "train/lm/run_config.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <stdexcept>

namespace dg {

using json::Value;

InitScheme parse_init_scheme(const std::string& text) {
  if (text == "parity") return InitScheme::parity;
  if (text == "identical") return InitScheme::identical;
  throw std::invalid_argument(
      fmt::format("unknown init '{}' (expected parity or identical)", text));
}
const char* init_scheme_name(InitScheme s) {
  return s == InitScheme::parity ? "parity" : "identical";
}

namespace {
std::string group_digits(int64_t v) {  // 140096 -> "140,096"
  const std::string s = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && s[i - 1] != '-' && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}
}  // namespace

int64_t default_warmup_steps(Schedule::Kind kind, int64_t steps) {
  return kind == Schedule::Kind::constant ? 0 : std::max<int64_t>(1, steps / 20);
}

// ---- the table: every setting of a run, once ---------------------------------------------

namespace {
template <class T>
T choose(const std::string& text, std::initializer_list<std::pair<const char*, T>> names) {
  std::string list;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    list += (list.empty() ? "" : " or ") + std::string(name);
  }
  throw std::invalid_argument(fmt::format("expected {}, got '{}'", list, text));
}
Norm::Kind parse_norm(const std::string& s) {
  return choose<Norm::Kind>(s, {{"rms", Norm::Kind::rms}, {"layer", Norm::Kind::layer}});
}
const char* norm_name(Norm::Kind k) { return k == Norm::Kind::rms ? "rms" : "layer"; }
FeedForward::Kind parse_ffn(const std::string& s) {
  return choose<FeedForward::Kind>(s, {{"swiglu", FeedForward::Kind::swiglu},
                                       {"gelu", FeedForward::Kind::gelu},
                                       {"gelu_tanh", FeedForward::Kind::gelu_tanh}});
}
const char* ffn_name(FeedForward::Kind k) {
  return k == FeedForward::Kind::swiglu ? "swiglu"
         : k == FeedForward::Kind::gelu ? "gelu"
                                        : "gelu_tanh";
}
}  // namespace

// The rows in the JSON's key order (which checkpoints and results store: never reorder). A row's
// default is the struct's initializer; its doc is the README's meaning column, word for word
// (tests/test_run_config.cpp checks the README row of each).
// data table: one row per setting of the run config (section, key, field, range, doc).
const SettingsTable<RunConfig>& run_config_settings() {
  using C = RunConfig;
  using M = MicroLMConfig;
  using T = LMTrainingConfig;
  using D = DataConfig;
  constexpr auto m = &C::model;
  constexpr auto t = &C::training;
  constexpr auto d = &C::data;
  constexpr auto adamw = &T::adamw;
  constexpr auto schedule = &T::schedule;
  const SettingRange size = at_least(1), count = at_least(0), fraction{.low = 0, .high = 1},
                     beta{.low = 0, .high = 1, .high_open = true};
  static const SettingsTable<RunConfig> table{
      setting<C>("model", "vocab", path(m, &M::vocab), {.low = 1, .high = 2147483647},
                 "BPE vocabulary size asked for; the model then takes the tokenizer's size"),
      setting<C>("model", "dim", path(m, &M::dim), size, "model width"),
      setting<C>("model", "layers", path(m, &M::layers), size, "transformer layers"),
      setting<C>("model", "heads", path(m, &M::heads), size, "attention heads (must divide `dim`)"),
      setting<C>(
          "model", "kv_heads", path(m, &M::kv_heads), size,
          "K/V heads (must divide `heads`; fewer = grouped-query attention); default: `heads`"),
      setting<C>("model", "seq_len", path(m, &M::seq_len), size,
                 "sequence length (training and evaluation windows)"),
      setting<C>("model", "expansion", path(m, &M::expansion), size,
                 "feed-forward width = expansion × dim"),
      choice<C>("model", "mode", path(m, &M::mode), parse_residual_mode, residual_mode_name,
                "residual mode: one of `depthgrad list --modes` (the registry in "
                "[nn/lm/residual/registry.cpp](../../nn/lm/residual/registry.cpp))"),
      choice<C>("model", "norm", path(m, &M::norm), parse_norm, norm_name, "rms or layer"),
      setting<C>("model", "norm_eps", path(m, &M::norm_eps), above(0), "epsilon of the norms"),
      choice<C>("model", "ffn", path(m, &M::ffn), parse_ffn, ffn_name,
                "feed-forward: swiglu, gelu (exact) or gelu_tanh (tanh approximation, GPT-2's)"),
      setting<C>("model", "rope", path(m, &M::rope), {}, "rotary position embeddings"),
      setting<C>("model", "bias", path(m, &M::bias), {}, "biases in the linear layers"),
      setting<C>("model", "learned_positions", path(m, &M::learned_positions), {},
                 "learned absolute position embeddings"),
      setting<C>("model", "tied_head", path(m, &M::tied_head), {},
                 "output head shares the embedding matrix"),
      setting<C>("model", "attnres_block_size", path(m, &M::attnres_block_size), size,
                 "paper modes: sublayers per block (1 = Full AttnRes)", "block-size"),
      omitted_at_default(
          setting<C>("model", "ffn_hidden", path(m, &M::ffn_hidden), count,
                     "feed-forward width itself, overriding `expansion` (0 = expansion × dim)")),
      omitted_at_default(
          setting<C>("model", "rope_theta", path(m, &M::rope_theta), above(0),
                     "RoPE base (inverse frequencies 1 / rope_theta^(2i / head_dim))")),
      setting<C>("training", "steps", path(t, &T::steps), size, "optimizer steps"),
      setting<C>("training", "batch", path(t, &T::batch), size, "sequences per step"),
      setting<C>("training", "clip", path(t, &T::clip), count,
                 "gradient clipping max norm (0 disables clipping)"),
      setting<C>("training", "lr", path(t, adamw, &AdamWConfig::lr), above(0),
                 "peak learning rate"),
      setting<C>("training", "beta1", path(t, adamw, &AdamWConfig::beta1), beta, "AdamW β1"),
      setting<C>("training", "beta2", path(t, adamw, &AdamWConfig::beta2), beta, "AdamW β2"),
      setting<C>("training", "eps", path(t, adamw, &AdamWConfig::eps), above(0), "AdamW ε"),
      setting<C>("training", "weight_decay", path(t, adamw, &AdamWConfig::weight_decay), count,
                 "AdamW decoupled weight decay"),
      choice<C>("training", "decay", path(t, adamw, &AdamWConfig::decay), parse_decay_policy,
                decay_policy_name, "parameters that decay: all or matrices"),
      choice<C>("training", "schedule", path(t, schedule, &Schedule::kind), parse_schedule_kind,
                schedule_kind_name,
                "learning-rate schedule: constant or cosine (linear warm-up, "
                "cosine to `lr × min_lr_ratio`)"),
      setting<C>("training", "warmup", path(t, schedule, &Schedule::warmup_steps), count,
                 "warm-up steps of the cosine schedule"),
      setting<C>("training", "min_lr_ratio", path(t, schedule, &Schedule::min_lr_ratio), fraction,
                 "where cosine ends, as a fraction of `lr`"),
      choice<C>("training", "init", path(t, &T::init), parse_init_scheme, init_scheme_name,
                "parity (torch's initialisation, per module) or identical (every mode starts as "
                "the same function)"),
      setting<C>("training", "seed", path(t, &T::seed), count,
                 "seed of initialisation and batch sampling"),
      setting<C>("training", "sequential", path(t, &T::sequential), {},
                 "consecutive windows instead of random windows"),
      setting<C>("training", "accum", path(t, &T::accum), size,
                 "micro-batches of `batch` windows per optimizer step (gradient accumulation; the "
                 "global batch is ranks × accum × batch)"),
      setting<C>("training", "zero", path(t, &T::zero), {.low = 0, .high = 2},
                 "ZeRO stage over MPI ranks: 1 = AdamW moments sharded, 2 = the gradients too; "
                 "changes no bit"),
      omitted_at_default(setting<C>(
          "training", "overlap", path(t, &T::overlap), {},
          "over MPI ranks, sum the gradient's buckets while backward runs (false: after it); "
          "changes no bit")),
      omitted_at_default(choice<C>(
          "training", "precision", path(t, &T::precision),
          [](const std::string& text) { return parse_precision(text); }, precision_name,
          "matmul precision: float32, or bf16 (bf16 inputs, float32 accumulation; needs a CPU "
          "with AMX-BF16 or AVX512_BF16)")),
      omitted_at_default(setting<C>(
          "training", "detect_anomaly", path(t, &T::detect_anomaly), {},
          "anomaly mode: the first non-finite gradient stops the run naming the op whose "
          "backward made it and the module that recorded the op (slower; changes no value)")),
      setting<C>("data", "dataset", path(d, &D::dataset), {},
                 "wikitext-2, tiny-shakespeare, or a path to your own text: a file, or a folder of "
                 "`train.txt`, `validation.txt` (or `valid.txt`, `val.txt`) and optionally "
                 "`test.txt`"),
      setting<C>("data", "validation_fraction", path(d, &D::validation_fraction),
                 {.low = 0, .high = 0.5, .low_open = true},
                 "own text without a validation file: the last fraction of it (from a line "
                 "start) is held out for validation; in (0, 0.5]"),
      setting<C>("data", "full_byte_alphabet", path(d, &D::full_byte_alphabet), {},
                 "the BPE alphabet is all 256 bytes, so any text round-trips exactly; false = only "
                 "the bytes the tokenizer's training text holds (the reference's tokenizer; the "
                 "parity protocol sets it)"),
      setting<C>("data", "train_limit", path(d, &D::train_limit), count,
                 "train ids used, the first ones (0 = all)"),
      setting<C>("data", "eval_limit", path(d, &D::eval_limit), count,
                 "validation and test ids used, the first ones (0 = all)"),
      setting<C>(
          "data", "eval_windows", path(d, &D::eval_windows), count,
          "evaluation windows of `seq_len` tokens from the split's start (0 = every window)"),
      setting<C>("data", "eval_full", path(d, &D::eval_full), {},
                 "also evaluate every window of the validation split"),
  };
  return table;
}

const std::vector<std::pair<std::string, std::vector<std::string>>>& run_config_keys() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> keys = [] {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const char* section : {"model", "training", "data"})
      out.emplace_back(section, section_keys(run_config_settings(), section));
    return out;
  }();
  return keys;
}

// ---- checks ----------------------------------------------------------------------------------

double estimated_step_flops(const RunConfig& config) {
  return 6.0 * static_cast<double>(config.model.parameter_count()) *
         static_cast<double>(config.training.batch) * static_cast<double>(config.model.seq_len);
}

void RunConfig::validate() const {
  try {
    check_settings(run_config_settings(), *this);  // each setting's type and range
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("run config: ") + e.what());
  }
  model.validate();  // across fields: "model config: kv_heads 3 must divide heads 4"
  if (data.dataset.empty())
    throw std::invalid_argument(
        "run config: data.dataset must be wikitext-2, tiny-shakespeare or a path to your own "
        "text, got ''");
}

// ---- JSON

json::Value model_json(const MicroLMConfig& model) {
  RunConfig c;
  c.model = model;
  return section_json(run_config_settings(), "model", c);
}

json::Value training_json(const LMTrainingConfig& training) {
  RunConfig c;
  c.training = training;
  return section_json(run_config_settings(), "training", c);
}

json::Value data_json(const DataConfig& data) {
  RunConfig c;
  c.data = data;
  return section_json(run_config_settings(), "data", c);
}

json::Value to_json(const RunConfig& c) {
  Value v;
  if (!c.preset.empty()) v["preset"] = c.preset;
  for (const char* section : {"model", "training", "data"})
    v[section] = section_json(run_config_settings(), section, c);
  return v;
}

RunConfig run_config_from_json(const json::Value& value, const std::string& source) {
  RunConfig c;
  auto fail = [&](const std::string& name, const std::string& what) {
    throw std::invalid_argument(fmt::format("{}: {}: {}", source, name, what));
  };
  if (!value.is_object())
    fail("(top level)", fmt::format("expected an object, got {}", json::kind_name(value.kind())));
  for (const auto& [key, member] : value.as_object())
    if (key != "preset" && key != "model" && key != "training" && key != "data")
      fail(key, "unknown key (known: preset, model, training, data)");
  if (const Value* p = value.find("preset")) {
    if (!p->is_string()) fail("preset", "expected a string");
    try {
      c.preset = find_run_preset(p->as_string()).name;
    } catch (const std::exception& e) {
      fail("preset", e.what());
    }
  }
  for (const char* section : {"model", "training", "data"})
    if (const Value* s = value.find(section))
      read_section(run_config_settings(), section, *s, c, source);
  const Value* model = value.find("model");
  if (!model || !model->find("kv_heads")) c.model.kv_heads = c.model.heads;  // follows heads
  c.training.schedule.lr = c.training.adamw.lr;  // the schedule's are the run's
  c.training.schedule.total_steps = c.training.steps;
  try {
    c.validate();
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: {}", source, e.what()));
  }
  return c;
}

// ---- presets

const std::vector<RunPreset>& run_presets() {
  // name, vocab, dim, layers, heads, seq_len, expansion, batch, bench warm-up, bench timed, note
  static const std::vector<RunPreset> presets{
      {"micro", 512, 64, 2, 4, 64, 3, 4, 3, 50, "the reference's run (the default)"},
      {"mini", 512, 128, 4, 4, 128, 3, 8, 3, 20, "about 1M parameters"},
      {"small", 512, 256, 8, 8, 256, 3, 8, 3, 5, "about 7M parameters"},
      {"base", 50304, 768, 12, 12, 256, 4, 4, 2, 3, "GPT-2-small sized"},
  };
  return presets;
}

const std::vector<std::string>& run_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const RunPreset& p : run_presets()) v.push_back(p.name);
    return v;
  }();
  return names;
}

const RunPreset& find_run_preset(const std::string& name) {
  for (const RunPreset& p : run_presets())
    if (name == p.name) return p;
  std::string names;
  const std::vector<std::string>& all = run_preset_names();
  for (size_t i = 0; i < all.size(); ++i)
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i];
  throw std::invalid_argument(fmt::format("unknown preset '{}' (expected {})", name, names));
}

void apply_run_preset(RunConfig& c, const std::string& name) {
  const RunPreset& p = find_run_preset(name);
  MicroLMConfig& m = c.model;
  m.vocab = p.vocab, m.dim = p.dim, m.layers = p.layers, m.heads = p.heads, m.kv_heads = p.heads;
  m.seq_len = p.seq_len, m.expansion = p.expansion;
  c.training.batch = p.batch;
  c.preset = p.name;
}

RunConfig run_preset(const std::string& name) {
  RunConfig c;
  apply_run_preset(c, name);
  c.validate();
  return c;
}

std::string run_preset_help() {
  std::string out;
  for (const RunPreset& p : run_presets()) {
    RunConfig c;
    apply_run_preset(c, p.name);
    c.model.mode = residual_mode("rd_attnres");
    const int64_t rd = c.model.parameter_count();
    c.model.mode = residual_mode("block_attnres");
    const int64_t block = c.model.parameter_count();
    out += fmt::format(
        "{}  {:<6} vocab {}, dim {}, {} layers, {} heads, seq {}, ffn {}x, batch {}: {} parameters "
        "(rd_attnres; block_attnres {}); {}",
        out.empty() ? "" : "\n", p.name, p.vocab, p.dim, p.layers, p.heads, p.seq_len, p.expansion,
        p.batch, group_digits(rd), group_digits(block), p.note);
  }
  return out;
}

}  // namespace dg
