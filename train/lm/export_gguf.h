// A standard-mode MicroLM and its byte-level BPE written as a GGUF v3 file that llama.cpp runs as
// one of two architectures: `llama` (RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases;
// the Q and K rows permuted for its RoPE layout) or `gpt2` (LayerNorm, learned positions, tanh
// GELU, biases, no RoPE; Q, K and V fused into attn_qkv). The hyperparameters are llama.* or
// gpt2.*, the tokenizer tokenizer.ggml.* (model "gpt2", pre-tokenizer "gpt-2"). It refuses,
// naming the setting, every model neither graph runs as trained: the AttnRes modes and any mix
// of the two (e.g. LayerNorm with SwiGLU, or exact-erf GELU, which llama.cpp's gpt2 would
// compute in the tanh form). It adds no CLI command (tools/cli/cmd_hf.cpp's `export` uses it).
//
// Quantized export (GgufExportOptions::quant = Q8_0, general.file_type 7, MOSTLY_Q8_0) stores
// tensors as llama.cpp's convert_hf_to_gguf.py --outtype q8_0 does: 1-D tensors (norm gains,
// biases) and position_embd F32; every other matrix, token_embd and output included, Q8_0 when
// its row (GGUF dims[0], the input width) is a multiple of 32, else `type` (the converter falls
// back to F16: the CLI passes f16 unless --type is given).
//
// LoRA (LoraFactors, one per adapted Linear, read from nn/lora.h's adapters by the caller):
// lora_adapter_gguf writes llama.cpp's adapter GGUF (convert_lora_to_gguf.py's layout, read by
// src/llama-adapter.cpp): general.type "adapter", adapter.type "lora", adapter.lora.alpha,
// general.architecture the base's; per adapted base tensor "<name>.lora_a" (A [r, in] as GGUF
// dims {in, r}) and "<name>.lora_b" (B [out, r] as {r, out}); llama.cpp adds
// (alpha / r) · B·(A·x) to that tensor's product, r read from lora_b's dims[0].
//
//   GgufFile adapter = lora_adapter_gguf(model, config, factors, GgufExportOptions{});
//   save_gguf("adapter.gguf", adapter);   // llama-cli -m base.gguf --lora adapter.gguf
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "train/lm/gguf.h"
#include "train/lm/text/bpe.h"

namespace dg {

// "f32", "f16" or "bf16" -> the tensor type; throws std::invalid_argument listing the three.
GgmlType parse_gguf_export_type(std::string_view name);
// "q8_0" -> Q8_0; throws std::invalid_argument naming the one quantization it writes.
GgmlType parse_gguf_quant_type(std::string_view name);

struct GgufExportOptions {
  GgmlType type = GgmlType::f32;  // matrices: F32, F16 or BF16 (without quant: all of them)
  // Q8_0: the matrices quantized as llama.cpp's converter chooses (header); then `type` is the
  // type of those whose rows Q8_0 cannot hold. Nothing else is accepted.
  std::optional<GgmlType> quant;
  std::string name = "depthgrad";  // general.name
  // tokenizer.ggml.bos_token_id / eos_token_id when >= 0 (an imported model's config.json ids);
  // else the tokenizer's "<bos>" / "<eos>" when it has them. Without an EOS id llama.cpp takes
  // its BPE default (id 11) as end-of-generation, which stops or biases greedy text there.
  int64_t bos_token_id = -1, eos_token_id = -1;
};

// The type a tensor is stored as (the header's rules): `gguf_name` is llama.cpp's name, the
// shape torch's.
GgmlType gguf_stored_type(const std::string& gguf_name, const std::vector<int64_t>& torch_shape,
                          const GgufExportOptions& options);

// The GGUF file of `model` (built from `config`, which must be the model's own) and the
// tokenizer it was trained with. Matrices are stored as `type` (F32, F16 or BF16, rounded to
// nearest even); 1-D tensors (norm gains and biases) stay F32, as llama.cpp's converter keeps
// them. A tied head is not written for llama (llama.cpp reads token_embd.weight as the output
// then); gpt2 always gets output.weight (a copy of token_embd when tied), which llama.cpp's gpt2
// loader requires. Throws std::invalid_argument naming the field (model.mode, model.norm,
// model.ffn, model.rope, model.bias, model.learned_positions, model.vocab) for a model llama.cpp
// cannot run as trained.
GgufFile micro_lm_gguf(const MicroLM& model, const MicroLMConfig& config,
                       const BpeTokenizer& tokenizer, GgmlType type = GgmlType::f32,
                       const std::string& name = "depthgrad");

// The same with quantization (GgufExportOptions::quant). A model with LoRA adapters attached
// (parameters under "<linear>.lora_A." / ".lora_B.") exports its base weights: merge first
// (nn/lora.h) to export the fine-tuned model.
GgufFile micro_lm_gguf(const MicroLM& model, const MicroLMConfig& config,
                       const BpeTokenizer& tokenizer, const GgufExportOptions& options);

// micro_lm_gguf(...) written to `path` atomically. Run it with `llama-cli -m path`.
void export_gguf(const MicroLM& model, const MicroLMConfig& config, const BpeTokenizer& tokenizer,
                 const std::string& path, GgmlType type = GgmlType::f32,
                 const std::string& name = "depthgrad");
void export_gguf(const MicroLM& model, const MicroLMConfig& config, const BpeTokenizer& tokenizer,
                 const std::string& path, const GgufExportOptions& options);

// One Linear's low-rank adapter as plain values: W' = W + scale · B·A.
struct LoraFactors {
  std::string linear;  // the Linear's path in the MicroLM, e.g. "blocks.0.attention.q"
  int64_t rank = 0, in = 0, out = 0;
  std::vector<float> a;  // A [rank, in], row-major
  std::vector<float> b;  // B [out, rank], row-major
  double scale = 0;      // alpha / rank (PEFT's lora_alpha / r)
};

// The adapters nn/lora.h attached to `model` (lora::adapted_linears, module order) as plain
// values; a shared A (lora::apply_shared) is copied into each member. Throws std::invalid_argument
// naming the Linear when an adapter is merged (the adapter file goes with the unmerged base: call
// lora::unmerge first) and when the model has none.
std::vector<LoraFactors> lora_factors_of(Module& model);

// llama.cpp's LoRA adapter GGUF of `factors` over `model` (the base, whose config `config`
// is; its own weights are not written). `options.type`/`quant` store lora_a and lora_b as
// gguf_stored_type does (convert_lora_to_gguf.py's default is F32). For `llama`, the B rows of
// attn_q and attn_k are permuted as the base's Q/K rows (permute_rows_for_llama_rope), A is not;
// for `gpt2`, q, k and v map onto the fused attn_qkv: one A (which every adapted member must
// share: lora::apply_shared, as PEFT's c_attn adapter) and B stacked [B_q; B_k; B_v] with zero
// rows for a member without an adapter. Throws std::invalid_argument naming the Linear for what
// llama.cpp cannot apply as trained: a Linear with no llama.cpp tensor, q/k/v of gpt2 with
// different A or scale, a shape that is not the model's, and factors whose scale · rank (alpha)
// differ (llama.cpp reads one adapter.lora.alpha) or is 0 (llama.cpp reads alpha 0 as scale 1).
GgufFile lora_adapter_gguf(const MicroLM& model, const MicroLMConfig& config,
                           const std::vector<LoraFactors>& factors,
                           const GgufExportOptions& options);

// The Q/K row order llama.cpp's RoPE expects: depthgrad rotates the pairs (i, i + d/2) of each
// d-wide head (rotate-half), llama.cpp's `llama` the adjacent pairs (2i, 2i + 1), so GGUF row
// head·d + 2i + j is depthgrad row head·d + j·d/2 + i (j = 0, 1). `rows` is [heads·d, cols],
// row-major; the result has the same shape.
std::vector<float> permute_rows_for_llama_rope(const std::vector<float>& rows, int64_t heads,
                                               int64_t head_dim, int64_t cols);

}  // namespace dg
