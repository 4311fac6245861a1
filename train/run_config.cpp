// The run configuration, its checks, its one JSON mapping and its presets (see run_config.h).
#include "train/run_config.h"

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

// ---- checks ----------------------------------------------------------------------------------

void RunConfig::validate() const {
  model.validate();  // names its field: "model config: kv_heads 3 must divide heads 4"
  auto fail = [](const std::string& what) { throw std::invalid_argument("run config: " + what); };
  auto at_least = [&](const char* key, int64_t value, int64_t low) {
    if (value < low) fail(fmt::format("{} must be >= {}, got {}", key, low, value));
  };
  auto finite = [&](const char* key, double value) {
    if (!std::isfinite(value)) fail(fmt::format("{} must be finite, got {}", key, value));
  };
  const TrainingConfig& t = training;
  at_least("training.steps", t.steps, 1);
  at_least("training.batch", t.batch, 1);
  at_least("training.accum", t.accum, 1);
  if (t.zero != 0 && t.zero != 1)
    fail(fmt::format("training.zero must be 0 or 1 (ZeRO stage 1), got {}", t.zero));
  finite("training.clip", t.clip);
  finite("training.lr", t.adamw.lr);
  if (!(t.adamw.lr > 0)) fail(fmt::format("training.lr must be positive, got {}", t.adamw.lr));
  for (auto [key, beta] :
       {std::pair{"training.beta1", t.adamw.beta1}, {"training.beta2", t.adamw.beta2}})
    if (!(beta >= 0 && beta < 1)) fail(fmt::format("{} must be in [0, 1), got {}", key, beta));
  if (!(t.adamw.eps > 0) || !std::isfinite(t.adamw.eps))
    fail(fmt::format("training.eps must be finite and > 0, got {}", t.adamw.eps));
  if (!(t.adamw.weight_decay >= 0) || !std::isfinite(t.adamw.weight_decay))
    fail(
        fmt::format("training.weight_decay must be finite and >= 0, got {}", t.adamw.weight_decay));
  at_least("training.warmup", t.schedule.warmup_steps, 0);
  if (!(t.schedule.min_lr_ratio >= 0 && t.schedule.min_lr_ratio <= 1))
    fail(fmt::format("training.min_lr_ratio must be in [0, 1], got {}", t.schedule.min_lr_ratio));
  if (data.dataset.empty())
    fail("data.dataset must be wikitext-2, tiny-shakespeare or a path to your own text, got ''");
  if (!(data.validation_fraction > 0 && data.validation_fraction <= 0.5))
    fail(fmt::format("data.validation_fraction must be in (0, 0.5], got {}",
                     data.validation_fraction));
  at_least("data.train_limit", data.train_limit, 0);
  at_least("data.eval_limit", data.eval_limit, 0);
  at_least("data.eval_windows", data.eval_windows, 0);
}

// ---- JSON: writing

json::Value model_json(const MicroLMConfig& m) {
  Value v;
  v["vocab"] = m.vocab;
  v["dim"] = m.dim;
  v["layers"] = m.layers;
  v["heads"] = m.heads;
  v["kv_heads"] = m.kv_heads;
  v["seq_len"] = m.seq_len;
  v["expansion"] = m.expansion;
  v["mode"] = residual_mode_name(m.mode);
  v["norm"] = m.norm == Norm::Kind::rms ? "rms" : "layer";
  v["norm_eps"] = m.norm_eps;
  v["ffn"] = m.ffn == FeedForward::Kind::swiglu ? "swiglu" : "gelu";
  v["rope"] = m.rope;
  v["bias"] = m.bias;
  v["learned_positions"] = m.learned_positions;
  v["tied_head"] = m.tied_head;
  v["attnres_block_size"] = m.attnres_block_size;
  return v;
}

json::Value training_json(const TrainingConfig& t) {
  Value v;
  v["steps"] = t.steps;
  v["batch"] = t.batch;
  v["clip"] = t.clip;
  v["lr"] = t.adamw.lr;
  v["beta1"] = t.adamw.beta1;
  v["beta2"] = t.adamw.beta2;
  v["eps"] = t.adamw.eps;
  v["weight_decay"] = t.adamw.weight_decay;
  v["decay"] = decay_policy_name(t.adamw.decay);
  v["schedule"] = schedule_kind_name(t.schedule.kind);
  v["warmup"] = t.schedule.warmup_steps;
  v["min_lr_ratio"] = t.schedule.min_lr_ratio;
  v["init"] = init_scheme_name(t.init);
  v["seed"] = t.seed;
  v["sequential"] = t.sequential;
  v["accum"] = t.accum;
  v["zero"] = t.zero;
  return v;
}

json::Value data_json(const DataConfig& d) {
  Value v;
  v["dataset"] = d.dataset;
  v["validation_fraction"] = d.validation_fraction;
  v["full_byte_alphabet"] = d.full_byte_alphabet;
  v["train_limit"] = d.train_limit;
  v["eval_limit"] = d.eval_limit;
  v["eval_windows"] = d.eval_windows;
  v["eval_full"] = d.eval_full;
  return v;
}

json::Value to_json(const RunConfig& c) {
  Value v;
  if (!c.preset.empty()) v["preset"] = c.preset;
  v["model"] = model_json(c.model);
  v["training"] = training_json(c.training);
  v["data"] = data_json(c.data);
  return v;
}

// ---- JSON: reading

namespace {

// Reads the members of one JSON object, every error naming "<source>: <path>.<key>".
class SectionReader {
 public:
  SectionReader(const Value& object, std::string path, const std::string& source,
                const std::vector<std::string>& known)
      : object_(object), path_(std::move(path)), source_(source) {
    if (!object.is_object())
      fail_at(path_, fmt::format("expected an object, got {}", kind_name(object.kind())));
    for (const auto& [key, value] : object.as_object()) {
      bool ok = false;
      for (const std::string& k : known) ok = ok || key == k;
      if (!ok) {
        std::string names;
        for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
        fail_at(name_of(key), fmt::format("unknown key (known: {})", names));
      }
    }
  }
  const Value* find(const char* key) const { return object_.find(key); }

  void integer(const char* key, int64_t& out) const {
    if (const Value* v = find(key)) {
      if (!v->is_integer()) fail(key, fmt::format("expected an integer, got {}", describe(*v)));
      out = v->as_int();
    }
  }
  void number(const char* key, double& out) const {
    if (const Value* v = find(key)) {
      if (!v->is_number()) fail(key, fmt::format("expected a number, got {}", describe(*v)));
      out = v->as_double();
    }
  }
  void boolean(const char* key, bool& out) const {
    if (const Value* v = find(key)) {
      if (!v->is_bool()) fail(key, fmt::format("expected true or false, got {}", describe(*v)));
      out = v->as_bool();
    }
  }
  // A string turned into a value by `parse` (whose errors say what is expected).
  template <class T, class Parse>
  void text(const char* key, T& out, Parse&& parse) const {
    if (const Value* v = find(key)) {
      if (!v->is_string()) fail(key, fmt::format("expected a string, got {}", describe(*v)));
      try {
        out = parse(v->as_string());
      } catch (const std::exception& e) {
        fail(key, e.what());
      }
    }
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    fail_at(name_of(key), what);
  }

 private:
  std::string name_of(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  [[noreturn]] void fail_at(const std::string& name, const std::string& what) const {
    throw std::invalid_argument(
        fmt::format("{}: {}: {}", source_, name.empty() ? "(top level)" : name, what));
  }
  static std::string describe(const Value& v) {
    return v.is_number() || v.is_bool() ? json::dump(v) : kind_name(v.kind());
  }
  const Value& object_;
  std::string path_;
  const std::string& source_;
};

template <class T>
T choose(const std::string& text, std::initializer_list<std::pair<const char*, T>> names) {
  std::string list;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    list += (list.empty() ? "" : " or ") + std::string(name);
  }
  throw std::invalid_argument(fmt::format("expected {}, got '{}'", list, text));
}

void read_model(const SectionReader& r, MicroLMConfig& m) {
  r.integer("vocab", m.vocab);
  r.integer("dim", m.dim);
  r.integer("layers", m.layers);
  r.integer("heads", m.heads);
  m.kv_heads = m.heads;
  r.integer("kv_heads", m.kv_heads);
  r.integer("seq_len", m.seq_len);
  r.integer("expansion", m.expansion);
  r.text("mode", m.mode, [](const std::string& s) { return parse_residual_mode(s); });
  r.text("norm", m.norm, [](const std::string& s) {
    return choose<Norm::Kind>(s, {{"rms", Norm::Kind::rms}, {"layer", Norm::Kind::layer}});
  });
  r.number("norm_eps", m.norm_eps);
  r.text("ffn", m.ffn, [](const std::string& s) {
    return choose<FeedForward::Kind>(
        s, {{"swiglu", FeedForward::Kind::swiglu}, {"gelu", FeedForward::Kind::gelu}});
  });
  r.boolean("rope", m.rope);
  r.boolean("bias", m.bias);
  r.boolean("learned_positions", m.learned_positions);
  r.boolean("tied_head", m.tied_head);
  r.integer("attnres_block_size", m.attnres_block_size);
}

void read_training(const SectionReader& r, TrainingConfig& t) {
  r.integer("steps", t.steps);
  r.integer("batch", t.batch);
  r.number("clip", t.clip);
  r.number("lr", t.adamw.lr);
  r.number("beta1", t.adamw.beta1);
  r.number("beta2", t.adamw.beta2);
  r.number("eps", t.adamw.eps);
  r.number("weight_decay", t.adamw.weight_decay);
  r.text("decay", t.adamw.decay, [](const std::string& s) { return parse_decay_policy(s); });
  r.text("schedule", t.schedule.kind, [](const std::string& s) { return parse_schedule_kind(s); });
  r.integer("warmup", t.schedule.warmup_steps);
  r.number("min_lr_ratio", t.schedule.min_lr_ratio);
  r.text("init", t.init, [](const std::string& s) { return parse_init_scheme(s); });
  int64_t seed = static_cast<int64_t>(t.seed);
  r.integer("seed", seed);
  if (seed < 0) r.fail("seed", fmt::format("must be >= 0, got {}", seed));
  t.seed = static_cast<uint64_t>(seed);
  r.boolean("sequential", t.sequential);
  r.integer("accum", t.accum);
  r.integer("zero", t.zero);
  t.schedule.lr = t.adamw.lr;
  t.schedule.total_steps = t.steps;
}

void read_data(const SectionReader& r, DataConfig& d) {
  r.text("dataset", d.dataset, [](const std::string& s) { return s; });
  r.number("validation_fraction", d.validation_fraction);
  r.boolean("full_byte_alphabet", d.full_byte_alphabet);
  r.integer("train_limit", d.train_limit);
  r.integer("eval_limit", d.eval_limit);
  r.integer("eval_windows", d.eval_windows);
  r.boolean("eval_full", d.eval_full);
}

}  // namespace

const std::vector<std::pair<std::string, std::vector<std::string>>>& run_config_keys() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> keys{
      {"model",
       {"vocab", "dim", "layers", "heads", "kv_heads", "seq_len", "expansion", "mode", "norm",
        "norm_eps", "ffn", "rope", "bias", "learned_positions", "tied_head", "attnres_block_size"}},
      {"training",
       {"steps", "batch", "clip", "lr", "beta1", "beta2", "eps", "weight_decay", "decay",
        "schedule", "warmup", "min_lr_ratio", "init", "seed", "sequential", "accum", "zero"}},
      {"data",
       {"dataset", "validation_fraction", "full_byte_alphabet", "train_limit", "eval_limit",
        "eval_windows", "eval_full"}}};
  return keys;
}

RunConfig run_config_from_json(const json::Value& value, const std::string& source) {
  RunConfig c;
  const auto& keys = run_config_keys();
  SectionReader top(value, "", source, {"preset", "model", "training", "data"});
  top.text("preset", c.preset, [](const std::string& s) { return find_run_preset(s).name; });
  if (const Value* m = top.find("model"))
    read_model(SectionReader(*m, "model", source, keys[0].second), c.model);
  if (const Value* t = top.find("training"))
    read_training(SectionReader(*t, "training", source, keys[1].second), c.training);
  if (const Value* d = top.find("data"))
    read_data(SectionReader(*d, "data", source, keys[2].second), c.data);
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
