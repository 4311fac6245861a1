// Importing and exporting Hugging Face GPT-2 and Llama folders (see hf_model.h).
#include "train/lm/hf_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "autograd/ops.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/io/sha256.h"
#include "train/lm/text/bpe.h"

namespace dg {

namespace {

using json::Value;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", where, what));
}

// ---- config.json fields, each read once and named in its error

class ConfigReader {
 public:
  ConfigReader(const Value& root, std::string source) : root_(root), source_(std::move(source)) {
    if (!root_.is_object()) fail(source_, "expected a JSON object");
  }
  const Value* find(const std::string& key) {
    seen_.insert(key);
    const Value* v = root_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  int64_t integer(const std::string& key, int64_t fallback = -1, bool required = true) {
    const Value* v = find(key);
    if (!v) {
      if (required) refuse(key, "missing");
      return fallback;
    }
    if (!v->is_integer() || v->as_int() < 0)
      refuse(key, "expected a non-negative integer, got " + json::dump(*v));
    return v->as_int();
  }
  double number(const std::string& key, double fallback) {
    const Value* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) refuse(key, "expected a number, got " + json::dump(*v));
    return v->as_double();
  }
  bool boolean(const std::string& key, bool fallback) {
    const Value* v = find(key);
    if (!v) return fallback;
    if (!v->is_bool()) refuse(key, "expected true or false, got " + json::dump(*v));
    return v->as_bool();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    const Value* v = find(key);
    if (!v) return fallback;
    if (!v->is_string()) refuse(key, "expected a string, got " + json::dump(*v));
    return v->as_string();
  }
  // The field must be absent, null or `wanted` (a value the MicroLM computes).
  void require(const std::string& key, const Value& wanted, const std::string& why) {
    const Value* v = find(key);
    if (v && !(*v == wanted))
      refuse(key, fmt::format("{} is not supported ({}; only {})", json::dump(*v), why,
                              json::dump(wanted)));
  }
  // Fields that change nothing the imported model computes (dropout rates, initialisation,
  // bookkeeping): read and dropped.
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) seen_.insert(k);
  }
  // Every field not read, checked or ignored is refused: an unknown field might change the model.
  void refuse_unknown() const {
    for (const auto& member : root_.as_object())
      if (!seen_.count(member.first))
        refuse(member.first,
               "not a field the importer knows (refused rather than ignored: it might change "
               "what the model computes)");
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& what) const {
    fail(source_, fmt::format("field '{}': {}", key, what));
  }

 private:
  const Value& root_;
  std::string source_;
  std::set<std::string> seen_;
};

// Fields every transformers config may carry that change nothing computed.
void ignore_common(ConfigReader& c) {
  c.ignore({"_name_or_path", "transformers_version", "torch_dtype", "use_cache",
            "initializer_range", "pad_token_id", "output_attentions", "output_hidden_states",
            "return_dict", "tokenizer_class", "id2label", "label2id", "gradient_checkpointing",
            "task_specific_params", "is_decoder", "output_past"});
}

// ---- tensors: F32, BF16, F16 to float32, exactly

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero and subnormals
  else if (exponent == 31)
    magnitude =
        mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  uint32_t bits;
  std::memcpy(&bits, &magnitude, 4);
  bits |= sign;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

Tensor to_float32(const TensorEntry& e, const std::string& source) {
  Tensor t = Tensor::empty(e.shape, DType::f32);
  float* out = t.data<float>();
  const int64_t n = t.numel();
  if (e.dtype == "F32") {
    if (n) std::memcpy(out, e.bytes.data(), e.bytes.size());
  } else if (e.dtype == "BF16" || e.dtype == "F16") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, e.bytes.data() + 2 * i, 2);
      if (e.dtype == "F16") {
        out[i] = half_to_float(h);
      } else {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(out + i, &bits, 4);
      }
    }
  } else {
    fail(source, fmt::format("tensor '{}' has dtype {}; the importer reads F32, BF16 and F16",
                             e.name, e.dtype));
  }
  return t;
}

// Every tensor of the folder by name: model.safetensors, or the shards the index lists.
std::map<std::string, Tensor> read_hf_tensors(const std::string& dir) {
  const std::string single = dir + "/model.safetensors", index = single + ".index.json";
  std::map<std::string, Tensor> out;
  auto add_file = [&](const std::string& path, const std::set<std::string>* wanted) {
    SafetensorsFile file = load_safetensors(path);
    for (const TensorEntry& e : file.tensors) {
      if (wanted && !wanted->count(e.name)) continue;
      if (out.count(e.name)) fail(path, fmt::format("tensor '{}' is in two files", e.name));
      out.emplace(e.name, to_float32(e, path));
    }
  };
  if (file_exists(single)) {
    add_file(single, nullptr);
    return out;
  }
  if (!file_exists(index))
    fail(dir,
         "no model.safetensors or model.safetensors.index.json (pytorch_model.bin is not read: "
         "save the model with safe_serialization)");
  const Value root = json::parse(read_file(index), index);
  const Value* map = root.is_object() ? root.find("weight_map") : nullptr;
  if (!map || !map->is_object()) fail(index, "field 'weight_map': missing or not an object");
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [name, file] : map->as_object()) {
    if (!file.is_string()) fail(index, fmt::format("weight_map['{}']: expected a file name", name));
    const std::string& f = file.as_string();
    if (f.find('/') != std::string::npos || f.empty() || f[0] == '.')
      fail(index, fmt::format("weight_map['{}']: '{}' is not a file of the folder", name, f));
    by_file[f].insert(name);
  }
  for (const auto& [file, names] : by_file) {
    add_file(dir + "/" + file, &names);
    for (const std::string& name : names)
      if (!out.count(name))
        fail(dir + "/" + file, fmt::format("tensor '{}' (listed in the index) is missing", name));
  }
  return out;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_floats() == b.to_floats();
}

// ---- the two classes, as MicroLM configs

MicroLMConfig base_config() {
  MicroLMConfig m;
  m.mode = residual_mode("standard");
  return m;
}

void set_ffn_width(MicroLMConfig& m, int64_t hidden) {
  if (hidden % m.dim == 0) {
    m.expansion = hidden / m.dim;
    m.ffn_hidden = 0;
  } else {
    m.expansion = 1;
    m.ffn_hidden = hidden;
  }
}

MicroLMConfig gpt2_config(ConfigReader& c, const HfImportOptions& options) {
  MicroLMConfig m = base_config();
  m.vocab = c.integer("vocab_size");
  m.dim = c.integer("n_embd");
  m.layers = c.integer("n_layer");
  m.heads = m.kv_heads = c.integer("n_head");
  const int64_t positions = c.integer("n_positions");
  c.integer("n_ctx", 0, false);  // the legacy alias of n_positions, unused by the model
  if (options.seq_len != 0 && options.seq_len != positions)
    c.refuse("n_positions", fmt::format("the learned position table has {} rows; --seq-len {} "
                                        "cannot change it",
                                        positions, options.seq_len));
  m.seq_len = positions;
  if (m.dim <= 0 || m.heads <= 0 || m.dim % m.heads != 0)
    c.refuse("n_head", fmt::format("{} does not divide n_embd {}", m.heads, m.dim));
  set_ffn_width(m, c.integer("n_inner", 4 * m.dim, false));
  const std::string act = c.string("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    m.ffn = FeedForward::Kind::gelu_tanh;
  else if (act == "gelu")
    m.ffn = FeedForward::Kind::gelu;
  else
    c.refuse("activation_function",
             fmt::format("'{}' is not supported (gelu_new, gelu_pytorch_tanh or gelu)", act));
  m.norm = Norm::Kind::layer;
  m.norm_eps = c.number("layer_norm_epsilon", 1e-5);
  m.rope = false;
  m.bias = true;
  m.learned_positions = true;
  m.tied_head = c.boolean("tie_word_embeddings", true);
  c.require("scale_attn_weights", true, "attention scores are always scaled by 1/sqrt(head_dim)");
  c.require("scale_attn_by_inverse_layer_idx", false, "no per-layer attention scaling");
  c.require("add_cross_attention", false, "a decoder-only model");
  c.ignore({"reorder_and_upcast_attn", "attn_pdrop", "embd_pdrop", "resid_pdrop",
            "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
            "summary_use_proj"});
  return m;
}

MicroLMConfig llama_config(ConfigReader& c, const HfImportOptions& options) {
  MicroLMConfig m = base_config();
  m.vocab = c.integer("vocab_size");
  m.dim = c.integer("hidden_size");
  m.layers = c.integer("num_hidden_layers");
  m.heads = c.integer("num_attention_heads");
  m.kv_heads = c.integer("num_key_value_heads", m.heads, false);
  if (m.dim <= 0 || m.heads <= 0 || m.dim % m.heads != 0)
    c.refuse("num_attention_heads",
             fmt::format("{} does not divide hidden_size {}", m.heads, m.dim));
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    c.refuse("num_key_value_heads",
             fmt::format("{} does not divide num_attention_heads {}", m.kv_heads, m.heads));
  const int64_t head_dim = c.integer("head_dim", m.dim / m.heads, false);
  if (head_dim != m.dim / m.heads)
    c.refuse("head_dim", fmt::format("{} is not hidden_size / num_attention_heads = {}", head_dim,
                                     m.dim / m.heads));
  const int64_t positions = c.integer("max_position_embeddings", 2048, false);
  if (options.seq_len > positions)
    c.refuse(
        "max_position_embeddings",
        fmt::format("--seq-len {} is beyond the model's {} positions", options.seq_len, positions));
  m.seq_len = options.seq_len > 0 ? options.seq_len : std::min<int64_t>(positions, 2048);
  set_ffn_width(m, c.integer("intermediate_size"));
  const std::string act = c.string("hidden_act", "silu");
  if (act != "silu")
    c.refuse("hidden_act", fmt::format("'{}' is not supported (only silu: SwiGLU)", act));
  m.ffn = FeedForward::Kind::swiglu;
  m.norm = Norm::Kind::rms;
  m.norm_eps = c.number("rms_norm_eps", 1e-6);
  m.rope = true;
  m.rope_theta = c.number("rope_theta", 10000.0);
  m.bias = false;
  m.learned_positions = false;
  m.tied_head = c.boolean("tie_word_embeddings", false);
  c.require("rope_scaling", nullptr, "RoPE frequencies are not rescaled");
  c.require("attention_bias", false, "no biases");
  c.require("mlp_bias", false, "no biases");
  c.require("sliding_window", nullptr, "attention sees the whole context");
  c.require("use_sliding_window", false, "attention sees the whole context");
  c.ignore({"attention_dropout", "pretraining_tp"});  // tp only splits the same matmuls
  return m;
}

// A GPT-2 block's tensors after the fused q/k/v, depthgrad's name beside Hugging Face's, in the
// order the import and the export list them; conv1d: stored in × out by GPT-2's Conv1D, so
// transposed on the way in and out.
struct Gpt2Tensor {
  const char* mine;
  const char* theirs;
  bool conv1d;
};
constexpr Gpt2Tensor kGpt2BlockTensors[] = {
    {"attention.output.weight", "attn.c_proj.weight", true},
    {"attention.output.bias", "attn.c_proj.bias", false},
    {"ffn_norm.weight", "ln_2.weight", false},
    {"ffn_norm.bias", "ln_2.bias", false},
    {"ffn.up.weight", "mlp.c_fc.weight", true},
    {"ffn.up.bias", "mlp.c_fc.bias", false},
    {"ffn.down.weight", "mlp.c_proj.weight", true},
    {"ffn.down.bias", "mlp.c_proj.bias", false},
};

// HF name -> depthgrad name, with GPT-2's transposes and c_attn split.
std::vector<NamedTensor> gpt2_weights(std::map<std::string, Tensor>& hf, const MicroLMConfig& m,
                                      const std::string& source) {
  // Checkpoints saved from GPT2LMHeadModel prefix "transformer."; the hub's original files do
  // not. The causal-mask buffers of old files (attn.bias [1, 1, n, n], attn.masked_bias) are
  // not weights.
  std::map<std::string, Tensor> w;
  for (auto& [name, t] : hf) {
    std::string n = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    if (n.ends_with(".attn.masked_bias") || (n.ends_with(".attn.bias") && t.dim() == 4)) continue;
    w.emplace(n, t);
  }
  auto take = [&](const std::string& name) {
    auto it = w.find(name);
    if (it == w.end()) fail(source, fmt::format("missing tensor '{}'", name));
    Tensor t = it->second;
    w.erase(it);
    return t;
  };
  auto transposed = [](const Tensor& t) { return transpose(t, 0, 1).contiguous(); };
  std::vector<NamedTensor> out;
  out.emplace_back("token.weight", take("wte.weight"));
  out.emplace_back("position.weight", take("wpe.weight"));
  const int64_t D = m.dim;
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string h = fmt::format("h.{}.", l), b = fmt::format("blocks.{}.", l);
    out.emplace_back(b + "attention_norm.weight", take(h + "ln_1.weight"));
    out.emplace_back(b + "attention_norm.bias", take(h + "ln_1.bias"));
    const Tensor qkv = transposed(take(h + "attn.c_attn.weight"));  // [3D, D]
    const Tensor qkv_bias = take(h + "attn.c_attn.bias");           // [3D]
    if (qkv.dim() != 2 || qkv.size(0) != 3 * D || qkv_bias.numel() != 3 * D)
      fail(source, fmt::format("tensor '{}attn.c_attn.weight' is {}, expected [{}, {}]", h,
                               qkv.describe(), D, 3 * D));
    const char* names[] = {"q", "k", "v"};
    for (int64_t i = 0; i < 3; ++i) {
      out.emplace_back(b + "attention." + names[i] + ".weight",
                       slice(qkv, 0, i * D, (i + 1) * D).contiguous());
      out.emplace_back(b + "attention." + names[i] + ".bias",
                       slice(qkv_bias, 0, i * D, (i + 1) * D).contiguous());
    }
    for (const Gpt2Tensor& g : kGpt2BlockTensors) {
      const Tensor t = take(h + g.theirs);
      out.emplace_back(b + g.mine, g.conv1d ? transposed(t) : t);
    }
  }
  out.emplace_back("final_norm.weight", take("ln_f.weight"));
  out.emplace_back("final_norm.bias", take("ln_f.bias"));
  if (!m.tied_head) {
    out.emplace_back("head.weight", take("lm_head.weight"));
  } else if (auto it = w.find("lm_head.weight"); it != w.end()) {
    // A tied head saved anyway must be the embedding itself.
    if (!same_values(it->second, out.front().second))
      fail(source, "lm_head.weight differs from wte.weight but tie_word_embeddings is true");
    w.erase(it);
  }
  if (!w.empty()) fail(source, fmt::format("unexpected tensor '{}'", w.begin()->first));
  return out;
}

// The Llama tensors' names, depthgrad's beside Hugging Face's, in the order the import and the
// export list them (both directions read this one table).
std::vector<std::pair<std::string, std::string>> llama_names(int64_t layers) {
  std::vector<std::pair<std::string, std::string>> names{
      {"token.weight", "model.embed_tokens.weight"}};
  for (int64_t l = 0; l < layers; ++l) {
    const std::string h = fmt::format("model.layers.{}.", l), b = fmt::format("blocks.{}.", l);
    for (auto [mine, theirs] :
         {std::pair<const char*, const char*>{"attention_norm.weight", "input_layernorm.weight"},
          {"attention.q.weight", "self_attn.q_proj.weight"},
          {"attention.k.weight", "self_attn.k_proj.weight"},
          {"attention.v.weight", "self_attn.v_proj.weight"},
          {"attention.output.weight", "self_attn.o_proj.weight"},
          {"ffn_norm.weight", "post_attention_layernorm.weight"},
          {"ffn.gate.weight", "mlp.gate_proj.weight"},
          {"ffn.up.weight", "mlp.up_proj.weight"},
          {"ffn.down.weight", "mlp.down_proj.weight"}})
      names.emplace_back(b + mine, h + theirs);
  }
  names.emplace_back("final_norm.weight", "model.norm.weight");
  return names;
}

std::vector<NamedTensor> llama_weights(std::map<std::string, Tensor>& w, const MicroLMConfig& m,
                                       const std::string& source) {
  for (auto it = w.begin(); it != w.end();)  // old files kept RoPE's inverse frequencies
    it = it->first.ends_with(".rotary_emb.inv_freq") ? w.erase(it) : std::next(it);
  auto take = [&](const std::string& name) {
    auto it = w.find(name);
    if (it == w.end()) fail(source, fmt::format("missing tensor '{}'", name));
    Tensor t = it->second;
    w.erase(it);
    return t;
  };
  std::vector<NamedTensor> out;
  // HF Llama's checkpoints already hold q and k in rotate_half order (the pairs (i, i + hd/2)
  // that depthgrad's RoPE rotates), so the rows are taken as they are.
  for (const auto& [mine, theirs] : llama_names(m.layers)) out.emplace_back(mine, take(theirs));
  if (!m.tied_head) {
    out.emplace_back("head.weight", take("lm_head.weight"));
  } else if (auto it = w.find("lm_head.weight"); it != w.end()) {
    if (!same_values(it->second, out.front().second))
      fail(source,
           "lm_head.weight differs from model.embed_tokens.weight but tie_word_embeddings is "
           "true");
    w.erase(it);
  }
  if (!w.empty()) fail(source, fmt::format("unexpected tensor '{}'", w.begin()->first));
  return out;
}

// The weights in the MicroLM's parameter order, every name and shape checked against it.
std::vector<NamedTensor> in_model_order(std::vector<NamedTensor> weights, const MicroLMConfig& m,
                                        const std::string& source) {
  std::map<std::string, Tensor> by_name(weights.begin(), weights.end());
  MicroLM model(m);  // its layers draw nothing (built under init::SkipGuard)
  std::vector<NamedTensor> out;
  for (const auto& [name, p] : model.named_parameters()) {
    auto it = by_name.find(name);
    if (it == by_name.end()) fail(source, fmt::format("no tensor maps to '{}'", name));
    if (it->second.shape() != p.shape())
      fail(source, fmt::format("the tensor for '{}' has shape {}, config.json implies {}", name,
                               shape_str(it->second.shape()), shape_str(p.shape())));
    out.emplace_back(name, it->second);
  }
  return out;
}

}  // namespace

HfImport read_hf_model(const std::string& dir, const HfImportOptions& options) {
  const std::string config_path = dir + "/config.json";
  if (!file_exists(config_path)) fail(dir, "no config.json: not a Hugging Face model folder");
  const Value root = json::parse(read_file(config_path), config_path);
  ConfigReader c(root, config_path);
  ignore_common(c);
  HfImport out;
  const std::string type = c.string("model_type", "");
  const Value* arch = c.find("architectures");
  if (arch && (!arch->is_array() || arch->size() != 1 || !arch->at(size_t{0}).is_string()))
    c.refuse("architectures", "expected one class name, got " + json::dump(*arch));
  out.architecture = arch ? arch->at(size_t{0}).as_string() : "";
  MicroLMConfig m;
  if (type == "gpt2") {
    if (!out.architecture.empty() && out.architecture != "GPT2LMHeadModel")
      c.refuse("architectures",
               fmt::format("'{}' is not supported (GPT2LMHeadModel)", out.architecture));
    out.architecture = "GPT2LMHeadModel";
    m = gpt2_config(c, options);
  } else if (type == "llama") {
    if (!out.architecture.empty() && out.architecture != "LlamaForCausalLM")
      c.refuse("architectures",
               fmt::format("'{}' is not supported (LlamaForCausalLM)", out.architecture));
    out.architecture = "LlamaForCausalLM";
    m = llama_config(c, options);
  } else {
    c.refuse("model_type", fmt::format("'{}' is not supported (gpt2 or llama)", type));
  }
  out.bos_token_id = c.integer("bos_token_id", -1, false);
  out.eos_token_id = c.integer("eos_token_id", -1, false);
  c.refuse_unknown();
  try {
    m.validate();
  } catch (const std::exception& e) {
    fail(config_path, e.what());
  }
  out.config.model = m;
  out.config.validate();

  const std::string tokenizer_path = dir + "/tokenizer.json";
  if (!file_exists(tokenizer_path))
    fail(dir, "no tokenizer.json (a tokenizer.json with a byte-level BPE is required)");
  out.tokenizer_json = read_file(tokenizer_path);
  const BpeTokenizer tokenizer = BpeTokenizer::from_json(out.tokenizer_json, tokenizer_path);
  if (tokenizer.vocab_size() != m.vocab)
    fail(tokenizer_path,
         fmt::format(
             "{} ids, but config.json's field 'vocab_size' is {} (padded vocabularies are not "
             "supported: sampling could pick ids the tokenizer cannot decode)",
             tokenizer.vocab_size(), m.vocab));
  for (int64_t id : {out.bos_token_id, out.eos_token_id})
    if (id >= m.vocab)
      fail(config_path, fmt::format("token id {} is outside the vocabulary of {}", id, m.vocab));

  std::map<std::string, Tensor> hf = read_hf_tensors(dir);
  const std::string source = dir + " (safetensors)";
  out.weights = in_model_order(out.architecture == "GPT2LMHeadModel" ? gpt2_weights(hf, m, source)
                                                                     : llama_weights(hf, m, source),
                               m, source);
  return out;
}

void write_imported_model(const HfImport& in, const std::string& out) {
  MicroLM model(in.config.model);
  model.load_state_dict(in.weights);
  std::map<std::string, std::string> meta{
      {"depthgrad.config", json::dump(to_json(in.config))},
      {"depthgrad.tokenizer_sha256", sha256_hex(in.tokenizer_json)},
      {"depthgrad.imported_from", in.architecture},
      {"depthgrad.tokenizer", "given"}};  // eval and train --init-from encode with it
  if (in.bos_token_id >= 0) meta["depthgrad.bos_token_id"] = std::to_string(in.bos_token_id);
  if (in.eos_token_id >= 0) meta["depthgrad.eos_token_id"] = std::to_string(in.eos_token_id);
  make_dirs(out);
  write_file_atomic(out + "/tokenizer.json", in.tokenizer_json);
  write_file_atomic(out + "/config.json", json::dump(to_json(in.config), 2) + "\n");
  save_weights(out + "/model.safetensors", model, meta);
}

std::string hf_architecture_for(const MicroLMConfig& m) {
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("export --to hf: {}", why));
  };
  if (residual_mode_name(m.mode) != std::string("standard"))
    refuse(
        fmt::format("mode {}: no Hugging Face class computes the AttnRes residual modes "
                    "(only standard-mode models export)",
                    residual_mode_name(m.mode)));
  const bool llama = m.norm == Norm::Kind::rms && m.ffn == FeedForward::Kind::swiglu && m.rope &&
                     !m.bias && !m.learned_positions;
  const bool gpt2 = m.norm == Norm::Kind::layer && m.ffn != FeedForward::Kind::swiglu && !m.rope &&
                    m.bias && m.learned_positions && m.kv_heads == m.heads;
  if (llama) return "LlamaForCausalLM";
  if (gpt2) return "GPT2LMHeadModel";
  refuse(fmt::format(
      "the model ({}{}{}) fits neither LlamaForCausalLM (rms norm, swiglu, rope, no bias, no "
      "learned positions) nor GPT2LMHeadModel (layer norm, gelu_tanh or gelu, learned positions, "
      "bias, no rope, kv_heads = heads)",
      m.describe(), m.bias ? " bias" : "", m.learned_positions ? " learned_positions" : ""));
  return "";
}

namespace {
// A parameter of the model being exported, contiguous, by its depthgrad name.
using ParameterByName = std::function<Tensor(const std::string&)>;

// GPT2LMHeadModel's tensors: Conv1D weights transposed, q, k and v as one c_attn.
std::vector<NamedTensor> gpt2_hf_tensors(const MicroLMConfig& m, const ParameterByName& get) {
  auto transposed = [](const Tensor& t) { return transpose(t, 0, 1).contiguous(); };
  std::vector<NamedTensor> out;
  const std::string t = "transformer.";
  out.emplace_back(t + "wte.weight", get("token.weight"));
  out.emplace_back(t + "wpe.weight", get("position.weight"));
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string h = fmt::format("{}h.{}.", t, l), b = fmt::format("blocks.{}.", l);
    out.emplace_back(h + "ln_1.weight", get(b + "attention_norm.weight"));
    out.emplace_back(h + "ln_1.bias", get(b + "attention_norm.bias"));
    out.emplace_back(h + "attn.c_attn.weight",
                     transposed(cat({get(b + "attention.q.weight"), get(b + "attention.k.weight"),
                                     get(b + "attention.v.weight")},
                                    0)));
    out.emplace_back(
        h + "attn.c_attn.bias",
        cat({get(b + "attention.q.bias"), get(b + "attention.k.bias"), get(b + "attention.v.bias")},
            0));
    for (const Gpt2Tensor& g : kGpt2BlockTensors) {
      const Tensor w = get(b + g.mine);
      out.emplace_back(h + g.theirs, g.conv1d ? transposed(w) : w);
    }
  }
  out.emplace_back(t + "ln_f.weight", get("final_norm.weight"));
  out.emplace_back(t + "ln_f.bias", get("final_norm.bias"));
  if (!m.tied_head) out.emplace_back("lm_head.weight", get("head.weight"));
  return out;
}

// GPT2LMHeadModel's config.json keys, in the order transformers writes them.
void add_gpt2_hf_config(const MicroLMConfig& m, Value& config) {
  const int64_t hidden = m.ffn_width();
  config["activation_function"] = m.ffn == FeedForward::Kind::gelu_tanh ? "gelu_new" : "gelu";
  config["architectures"] = json::Array{Value("GPT2LMHeadModel")};
  config["attn_pdrop"] = 0.0;  // depthgrad trains without dropout
  config["embd_pdrop"] = 0.0;
  config["layer_norm_epsilon"] = m.norm_eps;
  config["model_type"] = "gpt2";
  config["n_embd"] = m.dim;
  config["n_head"] = m.heads;
  config["n_inner"] = hidden == 4 * m.dim ? Value() : Value(hidden);
  config["n_layer"] = m.layers;
  config["n_positions"] = m.seq_len;
  config["resid_pdrop"] = 0.0;
  config["tie_word_embeddings"] = m.tied_head;
}

// LlamaForCausalLM's tensors: renamed (llama_names), none reshaped.
std::vector<NamedTensor> llama_hf_tensors(const MicroLMConfig& m, const ParameterByName& get) {
  std::vector<NamedTensor> out;
  for (const auto& [mine, theirs] : llama_names(m.layers)) out.emplace_back(theirs, get(mine));
  if (!m.tied_head) out.emplace_back("lm_head.weight", get("head.weight"));
  return out;
}

// LlamaForCausalLM's config.json keys, in the order transformers writes them.
void add_llama_hf_config(const MicroLMConfig& m, Value& config) {
  config["architectures"] = json::Array{Value("LlamaForCausalLM")};
  config["attention_bias"] = false;
  config["attention_dropout"] = 0.0;
  config["head_dim"] = m.dim / m.heads;
  config["hidden_act"] = "silu";
  config["hidden_size"] = m.dim;
  config["intermediate_size"] = m.ffn_width();
  config["max_position_embeddings"] = m.seq_len;
  config["mlp_bias"] = false;
  config["model_type"] = "llama";
  config["num_attention_heads"] = m.heads;
  config["num_hidden_layers"] = m.layers;
  config["num_key_value_heads"] = m.kv_heads;
  config["rms_norm_eps"] = m.norm_eps;
  config["rope_scaling"] = nullptr;
  config["rope_theta"] = m.rope_theta;
  config["tie_word_embeddings"] = m.tied_head;
}
}  // namespace

std::string export_hf(const Module& model, const MicroLMConfig& m,
                      const std::string& tokenizer_json, int64_t bos_token_id, int64_t eos_token_id,
                      const std::string& dir) {
  const std::string arch = hf_architecture_for(m);
  NoGradGuard no_grad;
  std::map<std::string, Tensor> p;
  for (const auto& [name, t] : model.named_parameters()) p.emplace(name, t);
  const ParameterByName get = [&](const std::string& name) {
    auto it = p.find(name);
    if (it == p.end()) throw std::logic_error("export_hf: no parameter " + name);
    return it->second.contiguous();
  };
  const bool gpt2 = arch == "GPT2LMHeadModel";
  const std::vector<NamedTensor> out = gpt2 ? gpt2_hf_tensors(m, get) : llama_hf_tensors(m, get);
  Value config = Value(json::Object{});
  if (gpt2)
    add_gpt2_hf_config(m, config);
  else
    add_llama_hf_config(m, config);
  config["torch_dtype"] = "float32";
  config["vocab_size"] = m.vocab;
  Value generation = Value(json::Object{});
  if (bos_token_id >= 0) config["bos_token_id"] = generation["bos_token_id"] = bos_token_id;
  if (eos_token_id >= 0) config["eos_token_id"] = generation["eos_token_id"] = eos_token_id;
  make_dirs(dir);
  write_file_atomic(dir + "/config.json", json::dump(config, 2) + "\n");
  write_file_atomic(dir + "/generation_config.json", json::dump(generation, 2) + "\n");
  write_file_atomic(dir + "/tokenizer.json", tokenizer_json);
  save_tensors(dir + "/model.safetensors", out, {{"format", "pt"}});
  return arch;
}

}  // namespace dg
