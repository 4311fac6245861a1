// The MicroLM -> llama.cpp GGUF mapping: the refusals, the llama.* / gpt2.* and tokenizer.ggml.*
// keys, the tensor names, the Q/K permutation (llama) and the fused Q/K/V (gpt2). The file format
// itself is train/lm/gguf.cpp's (Q8_0 included); this file decides only what goes in it, and
// which tensors are quantized. The LoRA adapter file is train/lm/export_gguf_lora.cpp's.
#include "train/lm/export_gguf.h"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "train/lm/export_gguf_detail.h"

namespace dg {

namespace gguf_export {

[[noreturn]] void refuse(const std::string& why) {
  throw std::invalid_argument("GGUF export: " + why);
}

// RoPE, depthgrad against llama.cpp (the derivation the permutation rests on).
//
// depthgrad (tensor/kernels_attention.cpp, rope_rows: "rotate-half", as Hugging Face's Llama):
// in a head of d = 2h values, pair i (0 ≤ i < h) is the values (i, i + h), turned by the angle
// t·θ_i at position t, θ_i = base^(-2i/d):
//   out[i] = x[i]·cos − x[i+h]·sin,  out[i+h] = x[i]·sin + x[i+h]·cos.
// llama.cpp's `llama` arch uses LLAMA_ROPE_TYPE_NORM (ggml's "normal" rope): pair i is the
// adjacent values (2i, 2i + 1), turned by the same angle t·θ_i (θ_i = base^(-2i/n_rot), n_rot =
// d). So with a permutation P of each head's rows, gguf[2i + j] = depthgrad[j·h + i] (j = 0, 1),
// llama's rotation of P·q is P applied to depthgrad's rotation of q: the same 2×2 rotation on
// the same pair of values, only stored elsewhere. Storing P·Wq and P·Wk (P per head; K heads
// counted with head_count_kv) gives q' = P·R_t·q and k' = P·R_s·k, and the scores
// q'·k' = (R_t q)ᵀ Pᵀ P (R_s k) = (R_t q)·(R_s k) are depthgrad's, P being orthogonal. V, the
// output projection and everything else are untouched. This is convert_hf_to_gguf.py's
// `permute` (reshape(n_head, 2, h, cols).swapaxes(1, 2)) for Hugging Face's Llama weights.
// tests/test_gguf.cpp checks it numerically against an interleaved-pairs RoPE of its own.

// depthgrad parameter name -> llama.cpp tensor name; empty when the name is not a llama tensor.
std::string llama_tensor_name(const std::string& name) {
  if (name == "token.weight") return "token_embd.weight";
  if (name == "final_norm.weight") return "output_norm.weight";
  if (name == "head.weight") return "output.weight";
  static const std::map<std::string, std::string> block = {
      {"attention_norm.weight", "attn_norm.weight"},
      {"attention.q.weight", "attn_q.weight"},
      {"attention.k.weight", "attn_k.weight"},
      {"attention.v.weight", "attn_v.weight"},
      {"attention.output.weight", "attn_output.weight"},
      {"ffn_norm.weight", "ffn_norm.weight"},
      {"ffn.gate.weight", "ffn_gate.weight"},
      {"ffn.up.weight", "ffn_up.weight"},
      {"ffn.down.weight", "ffn_down.weight"},
  };
  const std::string prefix = "blocks.";
  if (name.compare(0, prefix.size(), prefix) != 0) return "";
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = name.substr(prefix.size(), dot - prefix.size());
  const auto it = block.find(name.substr(dot + 1));
  if (layer.empty() || it == block.end()) return "";
  return "blk." + layer + "." + it->second;
}

// The llama.cpp architecture a model fits, or what stops it. Both read one residual stream
// (the standard mode); llama is RMSNorm + SwiGLU + RoPE without biases or learned positions,
// gpt2 is LayerNorm + tanh GELU + learned positions + biases without RoPE (llama.cpp's gpt2
// computes ggml_gelu, the tanh form: an exact-erf `gelu` model is refused, not approximated).
// The refusal names the fields that stop the closer of the two (both on a tie).
std::vector<std::string> llama_misfits(const MicroLMConfig& c) {
  std::vector<std::string> why;
  if (c.norm != Norm::Kind::rms)
    why.push_back("model.norm 'layer': llama's blocks use RMSNorm; train with model.norm 'rms'");
  if (c.ffn != FeedForward::Kind::swiglu)
    why.push_back(
        fmt::format("model.ffn '{}': llama's feed-forward is SwiGLU; train with "
                    "model.ffn 'swiglu'",
                    c.ffn == FeedForward::Kind::gelu ? "gelu" : "gelu_tanh"));
  if (!c.rope) why.push_back("model.rope false: llama applies RoPE in every layer");
  if (c.learned_positions)
    why.push_back("model.learned_positions true: llama has no position embedding table");
  if (c.bias) why.push_back("model.bias true: llama's linear layers have no biases");
  return why;
}

std::vector<std::string> gpt2_misfits(const MicroLMConfig& c) {
  std::vector<std::string> why;
  if (c.norm != Norm::Kind::layer) why.push_back("model.norm 'rms': gpt2's blocks use LayerNorm");
  if (c.ffn == FeedForward::Kind::gelu)
    why.push_back(
        "model.ffn 'gelu' (exact erf): llama.cpp's gpt2 computes the tanh GELU "
        "(gelu_tanh), which would change the model's outputs");
  else if (c.ffn != FeedForward::Kind::gelu_tanh)
    why.push_back("model.ffn 'swiglu': gpt2's feed-forward is up, tanh GELU, down");
  if (c.rope) why.push_back("model.rope true: gpt2 has no RoPE");
  if (!c.learned_positions)
    why.push_back("model.learned_positions false: gpt2 adds a learned position table");
  if (!c.bias) why.push_back("model.bias false: gpt2's norms and linear layers have biases");
  return why;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

GgufArch architecture_of(const MicroLMConfig& c) {
  const std::string mode = c.mode.name();
  if (is_reference_attnres(c.mode) || is_paper_attnres(c.mode))
    refuse(
        fmt::format("model.mode '{}' is an AttnRes mode: its blocks read learned mixes of "
                    "earlier layers' outputs, which llama.cpp's one residual stream cannot "
                    "express; only 'standard' exports",
                    mode));
  if (mode != "standard")
    refuse(
        fmt::format("model.mode '{}': only 'standard' (the Llama or GPT-2 block) exports", mode));
  const std::vector<std::string> llama = llama_misfits(c), gpt2 = gpt2_misfits(c);
  if (!llama.empty() && !gpt2.empty()) {
    if (llama.size() < gpt2.size()) refuse(joined(llama) + " (llama.cpp's llama architecture)");
    if (gpt2.size() < llama.size()) refuse(joined(gpt2) + " (llama.cpp's gpt2 architecture)");
    refuse("the model fits neither llama.cpp's llama (" + joined(llama) + ") nor its gpt2 (" +
           joined(gpt2) + ")");
  }
  return llama.empty() ? GgufArch::llama : GgufArch::gpt2;
}

void check_config_is_models(const MicroLM& model, const MicroLMConfig& c) {
  const MicroLMConfig& m = model.config();
  const auto same = [](const char* field, int64_t given, int64_t model_value) {
    if (given != model_value)
      refuse(fmt::format("{} {} differs from the model's {}", field, given, model_value));
  };
  same("model.vocab", c.vocab, m.vocab);
  same("model.dim", c.dim, m.dim);
  same("model.layers", c.layers, m.layers);
  same("model.heads", c.heads, m.heads);
  same("model.kv_heads", c.kv_heads, m.kv_heads);
  same("the feed-forward width (model.expansion, model.ffn_hidden)", c.ffn_width(), m.ffn_width());
  same("model.seq_len", c.seq_len, m.seq_len);
  same("model.tied_head", c.tied_head, m.tied_head);
  if (c.mode != m.mode || c.norm_eps != m.norm_eps || c.norm != m.norm || c.ffn != m.ffn ||
      c.rope != m.rope || c.bias != m.bias || c.learned_positions != m.learned_positions)
    refuse(
        "the config's model.mode, norm, norm_eps, ffn, rope, bias or learned_positions differs "
        "from the model's");
}

GgufArch check_exportable(const MicroLM& model, const MicroLMConfig& c, const BpeTokenizer& tok) {
  const GgufArch arch = architecture_of(c);
  check_config_is_models(model, c);
  if (tok.vocab_size() > c.vocab)
    refuse(fmt::format("model.vocab {} is smaller than the tokenizer's {} ids", c.vocab,
                       tok.vocab_size()));
  return arch;
}

// A parameter of a LoRA adapter attached to a Linear (nn/lora.h: its lora_A and lora_B children),
// which the base model's export leaves out.
bool is_lora_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

std::vector<float> floats_of(const Tensor& t) {
  const std::vector<double> values = t.to_vector();
  return std::vector<float>(values.begin(), values.end());
}

void add_llama_tensors(const MicroLM& model, const MicroLMConfig& c, const GgufExportOptions& o,
                       GgufFile& file) {
  const int64_t head_dim = c.dim / c.heads;
  for (const auto& [param, tensor] : model.named_parameters()) {
    if (is_lora_parameter(param)) continue;
    const std::string gguf_name = llama_tensor_name(param);
    if (gguf_name.empty())
      refuse(fmt::format("parameter '{}' has no tensor in llama.cpp's llama architecture", param));
    std::vector<float> values = floats_of(tensor);
    const std::vector<int64_t> shape = tensor.shape();
    const bool is_q = param.ends_with(".attention.q.weight");
    if (is_q || param.ends_with(".attention.k.weight"))
      values = permute_rows_for_llama_rope(values, is_q ? c.heads : c.kv_heads, head_dim, c.dim);
    file.tensors.push_back(
        gguf_float_tensor(gguf_name, shape, values, gguf_stored_type(gguf_name, shape, o)));
  }
}

// llama.cpp's gpt2 (build_gpt2): token_embd + position_embd rows; per block LayerNorm, the fused
// attn_qkv projection (+ bias) whose output it views as Q (the first dim values), K (the next
// kv_dim), V (the last kv_dim), attn_output (+ bias), LayerNorm, ffn_up (+ bias), tanh GELU,
// ffn_down (+ bias); output_norm, then output. Every matrix is ggml_mul_mat(W, x) with W's
// ne[0] the input width: depthgrad's [out, in] row-major Linear weight is exactly that in GGUF's
// reversed dims, so nothing is transposed (Hugging Face's GPT-2 Conv1D stores [in, out], which
// is why llama.cpp's converter transposes it). output.weight is always written, a copy of
// token_embd when the head is tied: llama.cpp's gpt2 loader requires it, and its converter
// writes the copy too.
void add_gpt2_tensors(const MicroLM& model, const MicroLMConfig& c, const GgufExportOptions& o,
                      GgufFile& file) {
  std::map<std::string, Tensor> params;
  for (const auto& [param, tensor] : model.named_parameters())
    if (!is_lora_parameter(param)) params.emplace(param, tensor);
  size_t used = 0;
  const auto get = [&](const std::string& param) -> const Tensor& {
    const auto it = params.find(param);
    if (it == params.end()) refuse(fmt::format("the model has no parameter '{}'", param));
    ++used;
    return it->second;
  };
  const auto put = [&](const std::string& gguf_name, const std::vector<int64_t>& shape,
                       const std::vector<float>& values) {
    file.tensors.push_back(
        gguf_float_tensor(gguf_name, shape, values, gguf_stored_type(gguf_name, shape, o)));
  };
  const auto copy = [&](const std::string& gguf_name, const std::string& param) {
    const Tensor& t = get(param);
    put(gguf_name, t.shape(), floats_of(t));
  };
  copy("token_embd.weight", "token.weight");
  copy("position_embd.weight", "position.weight");
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string b = fmt::format("blocks.{}.", l), g = fmt::format("blk.{}.", l);
    for (const char* part : {"weight", "bias"}) {
      const std::string p = part;
      copy(g + "attn_norm." + p, b + "attention_norm." + p);
      std::vector<float> qkv;
      int64_t rows = 0;
      for (const char* which : {"q", "k", "v"}) {
        const Tensor& t = get(b + "attention." + which + "." + p);
        const std::vector<float> v = floats_of(t);
        qkv.insert(qkv.end(), v.begin(), v.end());
        rows += t.shape().at(0);
      }
      put(g + "attn_qkv." + p,
          p == "weight" ? std::vector<int64_t>{rows, c.dim} : std::vector<int64_t>{rows}, qkv);
      copy(g + "attn_output." + p, b + "attention.output." + p);
      copy(g + "ffn_norm." + p, b + "ffn_norm." + p);
      copy(g + "ffn_up." + p, b + "ffn.up." + p);
      copy(g + "ffn_down." + p, b + "ffn.down." + p);
    }
  }
  copy("output_norm.weight", "final_norm.weight");
  copy("output_norm.bias", "final_norm.bias");
  copy("output.weight", c.tied_head ? "token.weight" : "head.weight");
  if (c.tied_head) --used;  // token.weight counted twice
  if (used != params.size())
    refuse(fmt::format("the model has {} parameters; llama.cpp's gpt2 tensors hold {}",
                       params.size(), used));
}

GgufValue u32(int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); }

void check_float_weights(const Module& module, const std::string& path) {
  if (const auto* linear = dynamic_cast<const Linear*>(&module); linear && linear->quantized_weight)
    refuse(
        fmt::format("Linear '{}' holds a quantized frozen weight (nn/quantize.h), which the "
                    "export cannot read back as written; export the model loaded from its "
                    "file (use --quant q8_0 for a quantized GGUF)",
                    path));
  for (const auto& [name, child] : module.named_children())
    check_float_weights(*child, path.empty() ? name : path + "." + name);
}

void check_export_options(const GgufExportOptions& o) {
  if (o.type != GgmlType::f32 && o.type != GgmlType::f16 && o.type != GgmlType::bf16)
    refuse(fmt::format("tensor type {} is not one of F32, F16, BF16", ggml_type_name(o.type)));
  if (o.quant && *o.quant != GgmlType::q8_0)
    refuse(fmt::format("quantization {} is not Q8_0", ggml_type_name(*o.quant)));
}

void add_file_type(const GgufExportOptions& o, std::vector<std::pair<std::string, GgufValue>>& kv) {
  // llama.cpp's file types: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_Q8_0 = 7, MOSTLY_BF16 = 32 (1-D
  // tensors F32 in all). A quantized file also says which quantization scheme version its
  // blocks follow (GGML_QNT_VERSION, 2 since 2023), as gguf-py's writer does.
  const uint32_t file_type = o.quant                   ? 7
                             : o.type == GgmlType::f32 ? 0
                             : o.type == GgmlType::f16 ? 1
                                                       : 32;
  kv.emplace_back("general.file_type", GgufValue::u32(file_type));
  if (o.quant) kv.emplace_back("general.quantization_version", GgufValue::u32(2));
}

}  // namespace gguf_export

GgmlType parse_gguf_export_type(std::string_view name) {
  if (name == "f32") return GgmlType::f32;
  if (name == "f16") return GgmlType::f16;
  if (name == "bf16") return GgmlType::bf16;
  throw std::invalid_argument(
      fmt::format("GGUF export: tensor type '{}' is not one of f32, f16, bf16", name));
}

GgmlType parse_gguf_quant_type(std::string_view name) {
  if (name == "q8_0") return GgmlType::q8_0;
  throw std::invalid_argument(
      fmt::format("GGUF export: quantization '{}' is not q8_0 (the one this writer has)", name));
}

GgmlType gguf_stored_type(const std::string& gguf_name, const std::vector<int64_t>& shape,
                          const GgufExportOptions& o) {
  // convert_hf_to_gguf.py: 1-D tensors and *_norm.weight F32 for every output type.
  if (shape.size() <= 1 || gguf_name.ends_with("_norm.weight")) return GgmlType::f32;
  if (!o.quant) return o.type;
  // With quantization, position_embd (and any tensor not named .weight / .lora_a / .lora_b)
  // stays F32; a row Q8_0 cannot hold (a QuantError there) falls back.
  if (gguf_name == "position_embd.weight") return GgmlType::f32;
  if (!gguf_name.ends_with(".weight") && !gguf_name.ends_with(".lora_a") &&
      !gguf_name.ends_with(".lora_b"))
    return GgmlType::f32;
  return shape.back() % static_cast<int64_t>(ggml_block_size(*o.quant)) == 0 ? *o.quant : o.type;
}

std::vector<float> permute_rows_for_llama_rope(const std::vector<float>& rows, int64_t heads,
                                               int64_t head_dim, int64_t cols) {
  if (head_dim % 2 != 0 || static_cast<int64_t>(rows.size()) != heads * head_dim * cols)
    throw std::invalid_argument(
        fmt::format("permute_rows_for_llama_rope: {} values are not "
                    "[{} heads × {} rows, {}] with an even head size",
                    rows.size(), heads, head_dim, cols));
  const int64_t half = head_dim / 2;
  std::vector<float> out(rows.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const float* from = rows.data() + (h * head_dim + j * half + i) * cols;
        float* to = out.data() + (h * head_dim + 2 * i + j) * cols;
        std::copy(from, from + cols, to);
      }
  return out;
}

GgufFile micro_lm_gguf(const MicroLM& model, const MicroLMConfig& c, const BpeTokenizer& tok,
                       GgmlType type, const std::string& name) {
  GgufExportOptions options;
  options.type = type;
  options.name = name;
  return micro_lm_gguf(model, c, tok, options);
}

GgufFile micro_lm_gguf(const MicroLM& model, const MicroLMConfig& c, const BpeTokenizer& tok,
                       const GgufExportOptions& options) {
  gguf_export::check_export_options(options);
  const gguf_export::GgufArch arch = gguf_export::check_exportable(model, c, tok);
  gguf_export::check_float_weights(model, "");
  const std::string prefix = arch == gguf_export::GgufArch::llama ? "llama." : "gpt2.";

  GgufFile file;
  auto& kv = file.metadata;
  kv.emplace_back("general.architecture",
                  GgufValue::string(arch == gguf_export::GgufArch::llama ? "llama" : "gpt2"));
  kv.emplace_back("general.name", GgufValue::string(options.name));
  gguf_export::add_file_type(options, kv);
  kv.emplace_back(prefix + "context_length", gguf_export::u32(c.seq_len));
  kv.emplace_back(prefix + "embedding_length", gguf_export::u32(c.dim));
  kv.emplace_back(prefix + "block_count", gguf_export::u32(c.layers));
  kv.emplace_back(prefix + "feed_forward_length", gguf_export::u32(c.ffn_width()));
  kv.emplace_back(prefix + "attention.head_count", gguf_export::u32(c.heads));
  kv.emplace_back(prefix + "attention.head_count_kv", gguf_export::u32(c.kv_heads));
  if (arch == gguf_export::GgufArch::llama) {
    const double rope_base = model.blocks.at(0)->attention->config.rope_base;
    kv.emplace_back("llama.rope.freq_base", GgufValue::f32(static_cast<float>(rope_base)));
    kv.emplace_back("llama.attention.layer_norm_rms_epsilon",
                    GgufValue::f32(static_cast<float>(c.norm_eps)));
    kv.emplace_back("llama.rope.dimension_count", gguf_export::u32(c.dim / c.heads));
    kv.emplace_back("llama.vocab_size", gguf_export::u32(c.vocab));
  } else {
    kv.emplace_back("gpt2.attention.layer_norm_epsilon",
                    GgufValue::f32(static_cast<float>(c.norm_eps)));
  }

  // The vocabulary: byte-level tokens as tokenizer.json writes them ("Ġthe"), which is the
  // alphabet llama.cpp's gpt2 tokenizer maps bytes to. Ids the model has beyond the tokenizer's
  // are "[PAD<id>]", unused, as llama.cpp's converter names them.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // 1 normal, 3 control (special added), 4 user defined, 5 unused
  for (int64_t id = 0; id < c.vocab; ++id) {
    if (id < tok.vocab_size()) {
      tokens.push_back(tok.token(static_cast<int>(id)));
      types.push_back(1);
    } else {
      tokens.push_back(fmt::format("[PAD{}]", id));
      types.push_back(5);
    }
  }
  for (const BpeTokenizer::AddedToken& added : tok.added_tokens())
    if (added.id >= 0 && added.id < c.vocab) types[added.id] = added.special ? 3 : 4;
  std::vector<std::string> merges;
  for (const auto& [left, right] : tok.merges()) merges.push_back(left + " " + right);
  kv.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
  // depthgrad's split is GPT-2's regex (train/lm/text/pretokenize.h); llama.cpp's name for it.
  kv.emplace_back("tokenizer.ggml.pre", GgufValue::string("gpt-2"));
  kv.emplace_back("tokenizer.ggml.tokens", GgufValue::strings(tokens));
  kv.emplace_back("tokenizer.ggml.token_type", GgufValue::i32s(types));
  kv.emplace_back("tokenizer.ggml.merges", GgufValue::strings(merges));
  const std::pair<const char*, const char*> specials[] = {
      {"tokenizer.ggml.bos_token_id", "<bos>"},
      {"tokenizer.ggml.eos_token_id", "<eos>"},
      {"tokenizer.ggml.unknown_token_id", "<unk>"},
      {"tokenizer.ggml.padding_token_id", "<pad>"},
  };
  for (const auto& [key, content] : specials) {
    int64_t id = tok.token_id(content);
    const std::string k = key;
    if (k.ends_with("bos_token_id") && options.bos_token_id >= 0) id = options.bos_token_id;
    if (k.ends_with("eos_token_id") && options.eos_token_id >= 0) id = options.eos_token_id;
    if (id >= c.vocab)
      gguf_export::refuse(fmt::format("{} {} is not below model.vocab {}", key, id, c.vocab));
    if (id >= 0) kv.emplace_back(key, gguf_export::u32(id));
  }
  // depthgrad trains and generates without BOS/EOS around the text.
  kv.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  kv.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));

  if (arch == gguf_export::GgufArch::llama)
    gguf_export::add_llama_tensors(model, c, options, file);
  else
    gguf_export::add_gpt2_tensors(model, c, options, file);
  return file;
}

void export_gguf(const MicroLM& model, const MicroLMConfig& config, const BpeTokenizer& tokenizer,
                 const std::string& path, GgmlType type, const std::string& name) {
  save_gguf(path, micro_lm_gguf(model, config, tokenizer, type, name));
}

void export_gguf(const MicroLM& model, const MicroLMConfig& config, const BpeTokenizer& tokenizer,
                 const std::string& path, const GgufExportOptions& options) {
  save_gguf(path, micro_lm_gguf(model, config, tokenizer, options));
}

}  // namespace dg
