// PEFT's LoRA adapter folders over an imported GPT-2 or Llama (see peft.h).
#include "train/lm/peft.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

#include "autograd/tape.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/lm/gguf.h"
#include "train/lm/hf_model.h"

namespace dg {

namespace {

using json::Value;

constexpr const char* kKeyPrefix = "base_model.model.";

// PEFT's rule for a list of target_modules (tuners_utils.check_target_module_exists).
bool target_matches(const std::string& module, const std::string& target) {
  if (module == target) return true;
  return module.size() > target.size() + 1 &&
         module.compare(module.size() - target.size(), target.size(), target) == 0 &&
         module[module.size() - target.size() - 1] == '.';
}

std::vector<PeftModule> llama_modules(int64_t layers) {
  std::vector<PeftModule> out;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string h = fmt::format("model.layers.{}.", l), b = fmt::format("blocks.{}.", l);
    for (const auto& [hf, dg_name] :
         {std::pair<const char*, const char*>{"self_attn.q_proj", "attention.q"},
          {"self_attn.k_proj", "attention.k"},
          {"self_attn.v_proj", "attention.v"},
          {"self_attn.o_proj", "attention.output"},
          {"mlp.gate_proj", "ffn.gate"},
          {"mlp.up_proj", "ffn.up"},
          {"mlp.down_proj", "ffn.down"}})
      out.push_back({h + hf, {b + dg_name}, false});
  }
  return out;
}

std::vector<PeftModule> gpt2_modules(int64_t layers) {
  std::vector<PeftModule> out;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string h = fmt::format("transformer.h.{}.", l), b = fmt::format("blocks.{}.", l);
    out.push_back(
        {h + "attn.c_attn", {b + "attention.q", b + "attention.k", b + "attention.v"}, true});
    out.push_back({h + "attn.c_proj", {b + "attention.output"}, true});
    out.push_back({h + "mlp.c_fc", {b + "ffn.up"}, true});
    out.push_back({h + "mlp.c_proj", {b + "ffn.down"}, true});
  }
  return out;
}

bool is_gpt2(const MicroLMConfig& model) { return hf_architecture_for(model) == "GPT2LMHeadModel"; }

std::vector<float> floats_of(const Tensor& t) { return t.contiguous().to_floats(); }

TensorEntry f32_entry(const std::string& name, const Tensor& t) {
  const std::vector<float> values = floats_of(t);
  TensorEntry e{name, "F32", t.shape(), std::vector<uint8_t>(values.size() * 4)};
  if (!values.empty()) std::memcpy(e.bytes.data(), values.data(), e.bytes.size());
  return e;
}

// An adapter tensor of the file as float32: F32, BF16 or F16 (exactly widened).
Tensor entry_to_float32(const TensorEntry& e, const std::string& source) {
  std::vector<float> values(e.bytes.size() / std::max<size_t>(1, safetensors_dtype_size(e.dtype)));
  if (e.dtype == "F32") {
    if (!values.empty()) std::memcpy(values.data(), e.bytes.data(), e.bytes.size());
  } else if (e.dtype == "BF16" || e.dtype == "F16") {
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, e.bytes.data() + 2 * i, 2);
      values[i] = e.dtype == "F16" ? f16_to_float(h) : bf16_to_float(h);
    }
  } else {
    throw std::runtime_error(
        fmt::format("{}: tensor '{}' has dtype {}; adapters are read as F32, BF16 or F16", source,
                    e.name, e.dtype));
  }
  return Tensor::from_vector(values, e.shape);
}

}  // namespace

lora::Options PeftLoraConfig::options() const {
  return lora::Options{.targets = {},
                       .r = r,
                       .alpha = lora_alpha,
                       .dropout = lora_dropout,
                       .use_rslora = use_rslora};
}

std::vector<PeftModule> peft_modules(const MicroLMConfig& model) {
  return is_gpt2(model) ? gpt2_modules(model.layers) : llama_modules(model.layers);
}

std::vector<std::string> peft_target_names(const MicroLMConfig& model) {
  if (is_gpt2(model)) return {"c_attn", "c_proj", "c_fc"};
  return {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
}

std::vector<PeftModule> peft_matched_modules(const MicroLMConfig& model,
                                             const std::vector<std::string>& targets,
                                             const std::string& what) {
  const std::vector<PeftModule> all = peft_modules(model);
  if (targets.empty()) throw std::invalid_argument(what + ": no target modules");
  for (const std::string& t : targets) {
    bool any = false;
    for (const PeftModule& m : all) any = any || target_matches(m.name, t);
    if (!any)
      throw std::invalid_argument(fmt::format(
          "{}: '{}' matches no module of {} that LoRA adapts here (valid: {}, or a longer suffix "
          "of a module name such as '{}')",
          what, t, hf_architecture_for(model), fmt::join(peft_target_names(model), ", "),
          all.front().name));
  }
  std::vector<PeftModule> out;
  for (const PeftModule& m : all)
    for (const std::string& t : targets)
      if (target_matches(m.name, t)) {
        out.push_back(m);
        break;
      }
  return out;
}

lora::Summary apply_peft_lora(Module& model, const MicroLMConfig& model_config,
                              const PeftLoraConfig& config) {
  const std::vector<PeftModule> modules = peft_matched_modules(model_config, config.target_modules);
  lora::Options options = config.options();
  for (const PeftModule& m : modules) {  // module order: the adapters' A draws come in it
    if (m.linears.size() > 1) {
      lora::apply_shared(model, m.linears, options);
    } else {
      options.targets = m.linears;  // the full name: matches that Linear only
      lora::apply(model, options);
    }
  }
  lora::Summary summary = lora::freeze_base(model);
  for (const auto& [name, linear] : lora::adapted_linears(model)) summary.adapted.push_back(name);
  return summary;
}

// ---- adapter_config.json

std::string peft_adapter_config_json(const MicroLMConfig& model, const PeftLoraConfig& config) {
  peft_matched_modules(model, config.target_modules);  // refuses a target that adapts nothing
  Value c = json::Object();                            // keys in sorted order, as PEFT writes
  c["alpha_pattern"] = json::Object();
  c["auto_mapping"] = nullptr;
  c["base_model_name_or_path"] = config.base_model_name_or_path;
  c["bias"] = "none";
  c["corda_config"] = nullptr;
  c["eva_config"] = nullptr;
  c["exclude_modules"] = nullptr;
  c["fan_in_fan_out"] = is_gpt2(model);  // PEFT sets it for Conv1D targets
  c["inference_mode"] = true;
  c["init_lora_weights"] = true;
  c["layer_replication"] = nullptr;
  c["layers_pattern"] = nullptr;
  c["layers_to_transform"] = nullptr;
  c["loftq_config"] = json::Object();
  const double alpha = config.lora_alpha;
  if (alpha == std::floor(alpha) && std::abs(alpha) < 1e15)
    c["lora_alpha"] = static_cast<int64_t>(alpha);  // PEFT's lora_alpha is an int
  else
    c["lora_alpha"] = alpha;
  c["lora_bias"] = false;
  c["lora_dropout"] = config.lora_dropout;
  c["megatron_config"] = nullptr;
  c["megatron_core"] = "megatron.core";
  c["modules_to_save"] = nullptr;
  c["peft_type"] = "LORA";
  c["r"] = config.r;
  c["rank_pattern"] = json::Object();
  c["revision"] = nullptr;
  json::Array targets;
  for (const std::string& t : config.target_modules) targets.push_back(t);
  c["target_modules"] = targets;
  c["task_type"] = "CAUSAL_LM";
  c["trainable_token_indices"] = nullptr;
  c["use_dora"] = false;
  c["use_rslora"] = config.use_rslora;
  return json::dump(c, 2);
}

namespace {

// A value that leaves the adapter as plain LoRA computes it: null, false, {} or [].
bool is_empty_setting(const Value& v) {
  return v.is_null() || (v.is_bool() && !v.as_bool()) || (v.is_object() && v.as_object().empty()) ||
         (v.is_array() && v.as_array().empty());
}

class AdapterConfigReader {
 public:
  AdapterConfigReader(const Value& root, std::string source)
      : root_(root), source_(std::move(source)) {
    if (!root_.is_object()) fail("", "expected a JSON object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw std::runtime_error(key.empty() ? fmt::format("{}: {}", source_, what)
                                         : fmt::format("{}: field '{}': {}", source_, key, what));
  }
  const Value* find(const std::string& key) {
    seen_.insert(key);
    const Value* v = root_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  // Settings depthgrad does not compute: accepted only when empty (absent, null, false, {}, []).
  void require_empty(const std::string& key, const std::string& why) {
    seen_.insert(key);
    const Value* v = root_.find(key);
    if (v && !is_empty_setting(*v))
      fail(key, fmt::format("{} is not supported ({})", json::dump(*v), why));
  }
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) seen_.insert(k);
  }
  // A field of a later PEFT is accepted when empty, refused otherwise: it might change the
  // adapter (PEFT itself drops fields it does not know).
  void refuse_unknown() const {
    for (const auto& [key, value] : root_.as_object())
      if (!seen_.count(key) && !is_empty_setting(value))
        fail(key,
             fmt::format("{}: not a field depthgrad knows (refused rather than ignored: it might "
                         "change what the adapter computes)",
                         json::dump(value)));
  }

 private:
  const Value& root_;
  std::string source_;
  std::set<std::string> seen_;
};

void read_fixed_settings(AdapterConfigReader& c) {
  const Value* type = c.find("peft_type");
  if (!type) c.fail("peft_type", "missing (PEFT writes \"LORA\")");
  if (!type->is_string() || type->as_string() != "LORA")
    c.fail("peft_type", json::dump(*type) + " is not supported (only \"LORA\")");
  if (const Value* task = c.find("task_type"))
    if (!task->is_string() || task->as_string() != "CAUSAL_LM")
      c.fail("task_type", json::dump(*task) + " is not supported (only \"CAUSAL_LM\" or null)");
  if (const Value* bias = c.find("bias"))
    if (!bias->is_string() || bias->as_string() != "none")
      c.fail("bias", json::dump(*bias) + " is not supported (only \"none\": no bias is trained)");
  if (const Value* init = c.find("init_lora_weights"))
    if (init->is_string())
      for (const char* changes_base : {"pissa", "olora", "corda", "loftq"})
        if (init->as_string().rfind(changes_base, 0) == 0)
          c.fail("init_lora_weights",
                 json::dump(*init) +
                     " is not supported (it changes the base weights the adapter "
                     "was trained on)");
  c.require_empty("use_dora", "DoRA's magnitude vector is not computed");
  c.require_empty("lora_bias", "no bias is trained in lora_B");
  c.require_empty("modules_to_save", "only LoRA adapters are trained and saved");
  c.require_empty("rank_pattern", "every adapter has rank r");
  c.require_empty("alpha_pattern", "every adapter has lora_alpha");
  c.require_empty("layers_to_transform", "every layer's matching modules are adapted");
  c.require_empty("layers_pattern", "every layer's matching modules are adapted");
  c.require_empty("exclude_modules", "no module is excluded");
  c.require_empty("layer_replication", "layers are not replicated");
  c.require_empty("trainable_token_indices", "embeddings are not trained");
  c.require_empty("megatron_config", "Megatron's parallel layers are not read");
  c.require_empty("loftq_config", "LoftQ changes the base weights");
  c.require_empty("target_parameters", "LoRA on parameters, not modules, is not computed");
  c.require_empty("use_qalora", "QA-LoRA is not computed");
  c.require_empty("alora_invocation_tokens", "activated LoRA is not computed");
  c.require_empty("eva_config", "");
  c.require_empty("corda_config", "");
  // fan_in_fan_out follows the layer (true for GPT-2's Conv1D, false for a Linear), as PEFT
  // corrects it; the rest is bookkeeping.
  c.ignore({"fan_in_fan_out", "inference_mode", "revision", "auto_mapping", "megatron_core",
            "peft_version", "qalora_group_size", "runtime_config", "ensure_weight_tying"});
}

}  // namespace

PeftLoraConfig parse_peft_adapter_config(const std::string& text, const std::string& source) {
  const Value root = json::parse(text, source);
  AdapterConfigReader c(root, source);
  read_fixed_settings(c);
  PeftLoraConfig config;
  if (const Value* r = c.find("r")) {
    if (!r->is_integer() || r->as_int() < 1)
      c.fail("r", "expected a positive integer, got " + json::dump(*r));
    config.r = r->as_int();
  }
  if (const Value* alpha = c.find("lora_alpha")) {
    if (!alpha->is_number() || !std::isfinite(alpha->as_double()))
      c.fail("lora_alpha", "expected a number, got " + json::dump(*alpha));
    config.lora_alpha = alpha->as_double();
  }
  if (const Value* p = c.find("lora_dropout")) {
    if (!p->is_number() || p->as_double() < 0 || p->as_double() >= 1)
      c.fail("lora_dropout", "expected a number in [0, 1), got " + json::dump(*p));
    config.lora_dropout = p->as_double();
  }
  if (const Value* rs = c.find("use_rslora")) {
    if (!rs->is_bool()) c.fail("use_rslora", "expected true or false, got " + json::dump(*rs));
    config.use_rslora = rs->as_bool();
  }
  if (const Value* base = c.find("base_model_name_or_path"); base && base->is_string())
    config.base_model_name_or_path = base->as_string();
  const Value* targets = c.find("target_modules");
  if (!targets) c.fail("target_modules", "missing");
  if (targets->is_string())
    c.fail("target_modules",
           json::dump(*targets) + " is a regular expression; depthgrad reads a list of names");
  if (!targets->is_array() || targets->as_array().empty())
    c.fail("target_modules", "expected a non-empty list of module names");
  for (const Value& t : targets->as_array()) {
    if (!t.is_string()) c.fail("target_modules", "expected names, got " + json::dump(t));
    config.target_modules.push_back(t.as_string());
  }
  c.refuse_unknown();
  return config;
}

// ---- the tensors

std::vector<NamedTensor> peft_adapter_tensors(Module& model, const MicroLMConfig& model_config,
                                              const PeftLoraConfig& config) {
  NoGradGuard no_grad;
  std::vector<NamedTensor> out;
  for (const PeftModule& m : peft_matched_modules(model_config, config.target_modules)) {
    const std::string key = kKeyPrefix + m.name;
    out.emplace_back(key + ".lora_A.weight",
                     model.parameter(m.linears.front() + ".lora_A.weight").contiguous());
    if (m.linears.size() == 1) {
      out.emplace_back(key + ".lora_B.weight",
                       model.parameter(m.linears.front() + ".lora_B.weight").contiguous());
      continue;
    }
    std::vector<float> stacked;  // c_attn's lora_B: the members' B rows, q then k then v
    int64_t rows = 0;
    for (const std::string& linear : m.linears) {
      const Tensor b = model.parameter(linear + ".lora_B.weight");
      const std::vector<float> values = floats_of(b);
      stacked.insert(stacked.end(), values.begin(), values.end());
      rows += b.shape()[0];
    }
    out.emplace_back(key + ".lora_B.weight", Tensor::from_vector(stacked, {rows, config.r}));
  }
  return out;
}

void save_peft_adapter(Module& model, const MicroLMConfig& model_config,
                       const PeftLoraConfig& config, const std::string& dir) {
  std::vector<TensorEntry> entries;
  for (const auto& [name, t] : peft_adapter_tensors(model, model_config, config))
    entries.push_back(f32_entry(name, t));
  const std::string config_text = peft_adapter_config_json(model_config, config);
  save_safetensors(dir + "/adapter_model.safetensors", entries, {{"format", "pt"}});
  write_file_atomic(dir + "/adapter_config.json", config_text);
}

namespace {

// The adapter's tensors of `file`, checked against the modules `config` adapts in `model`, as
// depthgrad parameters (c_attn's lora_B cut into its members' rows).
std::vector<NamedTensor> adapter_parameters(const SafetensorsFile& file, const std::string& path,
                                            const Module& model, const MicroLMConfig& model_config,
                                            const PeftLoraConfig& config) {
  std::map<std::string, const TensorEntry*> by_name;
  for (const TensorEntry& e : file.tensors) by_name[e.name] = &e;
  std::vector<NamedTensor> out;
  const std::vector<PeftModule> modules =
      peft_matched_modules(model_config, config.target_modules, path + ": target_modules");
  for (const PeftModule& m : modules) {
    std::vector<int64_t> outs;
    for (const std::string& linear : m.linears)
      outs.push_back(model.parameter(linear + ".weight").shape()[0]);
    const int64_t in = model.parameter(m.linears.front() + ".weight").shape()[1];
    int64_t out_total = 0;
    for (int64_t o : outs) out_total += o;
    auto take = [&](const std::string& suffix, const std::vector<int64_t>& shape) {
      const std::string key = kKeyPrefix + m.name + suffix;
      auto it = by_name.find(key);
      if (it == by_name.end())
        throw std::runtime_error(
            fmt::format("{}: tensor '{}' is missing (target_modules adapt {})", path, key, m.name));
      if (it->second->shape != shape)
        throw std::runtime_error(fmt::format("{}: tensor '{}' is [{}], expected [{}] (r = {})",
                                             path, key, fmt::join(it->second->shape, ", "),
                                             fmt::join(shape, ", "), config.r));
      Tensor t = entry_to_float32(*it->second, path);
      by_name.erase(it);
      return t;
    };
    out.emplace_back(m.linears.front() + ".lora_A.weight", take(".lora_A.weight", {config.r, in}));
    const std::vector<float> b = floats_of(take(".lora_B.weight", {out_total, config.r}));
    int64_t row = 0;
    for (size_t i = 0; i < m.linears.size(); ++i) {
      const std::vector<float> part(b.begin() + row * config.r,
                                    b.begin() + (row + outs[i]) * config.r);
      out.emplace_back(m.linears[i] + ".lora_B.weight",
                       Tensor::from_vector(part, {outs[i], config.r}));
      row += outs[i];
    }
  }
  if (!by_name.empty())
    throw std::runtime_error(fmt::format(
        "{}: tensor '{}' is no adapted module's (adapter_config.json's target_modules {} adapt "
        "{} modules of {}, keys like '{}{}.lora_A.weight')",
        path, by_name.begin()->first, fmt::join(config.target_modules, ", "), modules.size(),
        hf_architecture_for(model_config), kKeyPrefix, peft_modules(model_config).front().name));
  return out;
}

}  // namespace

PeftLoraConfig load_peft_adapter(Module& model, const MicroLMConfig& model_config,
                                 const std::string& dir) {
  const std::string config_path = dir + "/adapter_config.json",
                    tensors_path = dir + "/adapter_model.safetensors";
  if (!file_exists(tensors_path) && file_exists(dir + "/adapter_model.bin"))
    throw std::runtime_error(
        fmt::format("{}: adapter_model.bin (pickle) is not read: save the adapter with "
                    "safe_serialization=True",
                    dir));
  const PeftLoraConfig config = parse_peft_adapter_config(read_file(config_path), config_path);
  peft_matched_modules(model_config, config.target_modules,
                       config_path + ": field 'target_modules'");
  const SafetensorsFile file = load_safetensors(tensors_path);
  const std::vector<NamedTensor> values =
      adapter_parameters(file, tensors_path, model, model_config, config);
  apply_peft_lora(model, model_config, config);
  model.load_state_dict(values, /*strict=*/false);
  return config;
}

}  // namespace dg
