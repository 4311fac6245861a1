// llama.cpp's LoRA adapter GGUF (lora_adapter_gguf, declared in train/lm/export_gguf.h): which
// base tensor each adapted Linear lands on, the checks that llama.cpp will apply it as trained,
// the llama Q/K permutation of B and gpt2's fused attn_qkv. The base model's file is
// export_gguf.cpp's; the adapters themselves come from the caller (LoraFactors).
//
// What llama.cpp does with the file (src/llama-adapter.cpp, llama-graph.cpp build_lora_mm): it
// pairs "<base>.lora_a" with "<base>.lora_b", requires the base tensor to exist with a.ne[0] =
// base.ne[0] (in), b.ne[1] = base.ne[1] (out) and a.ne[1] = b.ne[0] (r), and computes
// W·x + (alpha / b.ne[0]) · B·(A·x) for every matrix product it routes through build_lora_mm: in
// `llama` and `gpt2` that is every projection (attn_q/k/v or attn_qkv, attn_output, ffn_*) and
// output. A tied llama head reads token_embd, not a Linear here, so it has no adapter.
#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "nn/lora.h"
#include "train/lm/export_gguf.h"
#include "train/lm/export_gguf_detail.h"

namespace dg {

namespace gguf_export {
namespace {

// One lora_a / lora_b pair in torch shapes: A [r, in], B [out, r].
struct AdapterPair {
  std::string base;  // the llama.cpp tensor it adapts, e.g. "blk.0.attn_q.weight"
  int64_t rank = 0, in = 0, out = 0;
  std::vector<float> a, b;
};

void check_factors_shape(const LoraFactors& f, const std::map<std::string, Tensor>& params) {
  if (f.rank <= 0 || f.in <= 0 || f.out <= 0)
    refuse(fmt::format("LoRA '{}': rank {}, in {}, out {} must be positive", f.linear, f.rank, f.in,
                       f.out));
  if (f.a.size() != static_cast<size_t>(f.rank * f.in) ||
      f.b.size() != static_cast<size_t>(f.out * f.rank))
    refuse(fmt::format("LoRA '{}': A has {} values and B {}; [{}, {}] and [{}, {}] need {} and {}",
                       f.linear, f.a.size(), f.b.size(), f.rank, f.in, f.out, f.rank, f.rank * f.in,
                       f.out * f.rank));
  const auto it = params.find(f.linear + ".weight");
  if (it == params.end())
    refuse(fmt::format("LoRA '{}': the model has no Linear of that name (no '{}.weight')", f.linear,
                       f.linear));
  const std::vector<int64_t> shape = it->second.shape();
  if (shape != std::vector<int64_t>{f.out, f.in})
    refuse(fmt::format("LoRA '{}': adapts [{}, {}] but the Linear's weight is [{}, {}]", f.linear,
                       f.out, f.in, shape.at(0), shape.size() > 1 ? shape[1] : 0));
}

// llama.cpp's one adapter.lora.alpha: every factor's scale · rank, equal (as float32) and not 0.
float common_alpha(const std::vector<LoraFactors>& factors) {
  if (factors.empty()) refuse("LoRA: no adapted Linear to write");
  const float alpha = static_cast<float>(factors[0].scale * static_cast<double>(factors[0].rank));
  for (const LoraFactors& f : factors) {
    const float mine = static_cast<float>(f.scale * static_cast<double>(f.rank));
    if (mine != alpha)
      refuse(
          fmt::format("LoRA '{}': scale · rank = {} but '{}' has {}; llama.cpp reads one "
                      "adapter.lora.alpha for the file (scale = alpha / rank)",
                      f.linear, mine, factors[0].linear, alpha));
  }
  if (alpha == 0.0f)
    refuse(
        fmt::format("LoRA '{}': alpha (scale · rank) is 0; llama.cpp reads "
                    "adapter.lora.alpha 0 as 'no alpha' and applies scale 1",
                    factors[0].linear));
  return alpha;
}

// llama: each Linear on its own tensor; attn_q / attn_k's B rows permuted as the base's rows.
std::vector<AdapterPair> llama_pairs(const std::vector<LoraFactors>& factors,
                                     const MicroLMConfig& c) {
  std::vector<AdapterPair> pairs;
  const int64_t head_dim = c.dim / c.heads;
  for (const LoraFactors& f : factors) {
    const std::string base = llama_tensor_name(f.linear + ".weight");
    if (base.empty() || base == "token_embd.weight")
      refuse(fmt::format("LoRA '{}': llama.cpp's llama has no adaptable tensor for this Linear",
                         f.linear));
    AdapterPair p{base, f.rank, f.in, f.out, f.a, f.b};
    const bool is_q = base.ends_with(".attn_q.weight");
    if (is_q || base.ends_with(".attn_k.weight"))
      p.b = permute_rows_for_llama_rope(f.b, is_q ? c.heads : c.kv_heads, head_dim, f.rank);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

// gpt2's tensor for a Linear other than q/k/v; empty when it has none.
std::string gpt2_tensor_name(const std::string& linear) {
  if (linear == "head") return "output.weight";
  const std::string prefix = "blocks.";
  if (!linear.starts_with(prefix)) return "";
  const size_t dot = linear.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = linear.substr(prefix.size(), dot - prefix.size()),
                    part = linear.substr(dot + 1);
  static const std::map<std::string, std::string> names = {
      {"attention.output", "attn_output"}, {"ffn.up", "ffn_up"}, {"ffn.down", "ffn_down"}};
  const auto it = names.find(part);
  if (layer.empty() || it == names.end()) return "";
  return "blk." + layer + "." + it->second + ".weight";
}

// gpt2's fused attn_qkv of layer `layer`: the members' shared A, B stacked [B_q; B_k; B_v] with
// zero rows for a member without an adapter. `members` holds the adapted ones by "q"/"k"/"v".
AdapterPair gpt2_qkv_pair(const std::string& layer,
                          const std::map<std::string, const LoraFactors*>& members,
                          const MicroLMConfig& c) {
  const LoraFactors& first = *(members.count("q")   ? members.at("q")
                               : members.count("k") ? members.at("k")
                                                    : members.at("v"));
  AdapterPair p{"blk." + layer + ".attn_qkv.weight", first.rank, first.in, 0, first.a, {}};
  const int64_t kv_dim = c.dim / c.heads * c.kv_heads;
  for (const char* which : {"q", "k", "v"}) {
    const int64_t rows = std::string(which) == "q" ? c.dim : kv_dim;
    const auto it = members.find(which);
    if (it == members.end()) {
      p.b.insert(p.b.end(), static_cast<size_t>(rows * p.rank), 0.0f);
    } else {
      const LoraFactors& f = *it->second;
      if (f.rank != first.rank || f.a != first.a || f.scale != first.scale)
        refuse(
            fmt::format("LoRA '{}' and '{}': llama.cpp's gpt2 computes q, k and v in one "
                        "fused attn_qkv, so their adapters must share one A, rank and scale "
                        "(lora::apply_shared, as PEFT's c_attn adapter); these differ",
                        first.linear, f.linear));
      p.b.insert(p.b.end(), f.b.begin(), f.b.end());
    }
    p.out += rows;
  }
  return p;
}

std::vector<AdapterPair> gpt2_pairs(const std::vector<LoraFactors>& factors,
                                    const MicroLMConfig& c) {
  std::vector<AdapterPair> pairs;
  std::map<std::string, std::map<std::string, const LoraFactors*>> qkv;  // layer -> members
  std::map<std::string, size_t> qkv_slot;  // layer -> its place in `pairs`
  for (const LoraFactors& f : factors) {
    const size_t dot = f.linear.rfind('.');
    const std::string tail = dot == std::string::npos ? "" : f.linear.substr(dot + 1);
    const std::string stem = dot == std::string::npos ? "" : f.linear.substr(0, dot);
    if (stem.starts_with("blocks.") && stem.ends_with(".attention") &&
        (tail == "q" || tail == "k" || tail == "v")) {
      const std::string layer = stem.substr(7, stem.size() - 7 - 10);
      qkv[layer][tail] = &f;
      if (!qkv_slot.count(layer)) {
        qkv_slot[layer] = pairs.size();
        pairs.emplace_back();  // filled once every member is known
      }
      continue;
    }
    const std::string base = gpt2_tensor_name(f.linear);
    if (base.empty())
      refuse(fmt::format("LoRA '{}': llama.cpp's gpt2 has no adaptable tensor for this Linear",
                         f.linear));
    pairs.push_back(AdapterPair{base, f.rank, f.in, f.out, f.a, f.b});
  }
  for (const auto& [layer, members] : qkv)
    pairs[qkv_slot[layer]] = gpt2_qkv_pair(layer, members, c);
  return pairs;
}

}  // namespace
}  // namespace gguf_export

std::vector<LoraFactors> lora_factors_of(Module& model) {
  std::vector<LoraFactors> out;
  for (const auto& [name, linear] : lora::adapted_linears(model)) {
    const Linear::LoRA& adapter = *linear->lora;
    if (adapter.merged)
      gguf_export::refuse(
          fmt::format("LoRA '{}' is merged into its weight: unmerge it (lora::unmerge) to "
                      "write the adapter apart from the base",
                      name));
    LoraFactors f;
    f.linear = name;
    f.rank = adapter.A->out_features;
    f.in = linear->in_features;
    f.out = linear->out_features;
    const std::vector<double> a = adapter.A->weight.to_vector(), b = adapter.B->weight.to_vector();
    f.a.assign(a.begin(), a.end());
    f.b.assign(b.begin(), b.end());
    f.scale = adapter.scale;
    out.push_back(std::move(f));
  }
  if (out.empty()) gguf_export::refuse("LoRA: the model has no adapter (lora::apply adds them)");
  return out;
}

GgufFile lora_adapter_gguf(const MicroLM& model, const MicroLMConfig& c,
                           const std::vector<LoraFactors>& factors,
                           const GgufExportOptions& options) {
  gguf_export::check_export_options(options);
  const gguf_export::GgufArch arch = gguf_export::architecture_of(c);
  gguf_export::check_config_is_models(model, c);
  gguf_export::check_float_weights(model, "");
  std::map<std::string, Tensor> params;
  for (const auto& [name, tensor] : model.named_parameters()) params.emplace(name, tensor);
  std::map<std::string, int> seen;
  for (const LoraFactors& f : factors) {
    if (++seen[f.linear] > 1) gguf_export::refuse(fmt::format("LoRA '{}': given twice", f.linear));
    gguf_export::check_factors_shape(f, params);
  }
  const float alpha = gguf_export::common_alpha(factors);

  GgufFile file;
  auto& kv = file.metadata;
  kv.emplace_back("general.architecture",
                  GgufValue::string(arch == gguf_export::GgufArch::llama ? "llama" : "gpt2"));
  kv.emplace_back("general.type", GgufValue::string("adapter"));
  kv.emplace_back("general.name", GgufValue::string(options.name));
  gguf_export::add_file_type(options, kv);
  kv.emplace_back("adapter.type", GgufValue::string("lora"));
  kv.emplace_back("adapter.lora.alpha", GgufValue::f32(alpha));
  const std::vector<gguf_export::AdapterPair> pairs = arch == gguf_export::GgufArch::llama
                                                          ? gguf_export::llama_pairs(factors, c)
                                                          : gguf_export::gpt2_pairs(factors, c);
  for (const gguf_export::AdapterPair& p : pairs) {
    const std::string a_name = p.base + ".lora_a", b_name = p.base + ".lora_b";
    const std::vector<int64_t> a_shape{p.rank, p.in}, b_shape{p.out, p.rank};
    file.tensors.push_back(
        gguf_float_tensor(a_name, a_shape, p.a, gguf_stored_type(a_name, a_shape, options)));
    file.tensors.push_back(
        gguf_float_tensor(b_name, b_shape, p.b, gguf_stored_type(b_name, b_shape, options)));
  }
  return file;
}

}  // namespace dg
