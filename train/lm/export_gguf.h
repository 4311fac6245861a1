// A standard-mode MicroLM and its byte-level BPE written as a GGUF v3 file that llama.cpp runs as
// one of two architectures: `llama` (RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases;
// the Q and K rows permuted for its RoPE layout) or `gpt2` (LayerNorm, learned positions, tanh
// GELU, biases, no RoPE; Q, K and V fused into attn_qkv). The hyperparameters are llama.* or
// gpt2.*, the tokenizer tokenizer.ggml.* (model "gpt2", pre-tokenizer "gpt-2"). It refuses,
// naming the setting, every model neither graph runs as trained: the AttnRes modes and any mix
// of the two (e.g. LayerNorm with SwiGLU, or exact-erf GELU, which llama.cpp's gpt2 would
// compute in the tanh form). It adds no CLI command.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "train/lm/gguf.h"
#include "train/lm/text/bpe.h"

namespace dg {

// "f32", "f16" or "bf16" -> the tensor type; throws std::invalid_argument listing the three.
GgmlType parse_gguf_export_type(std::string_view name);

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

// micro_lm_gguf(...) written to `path` atomically. Run it with `llama-cli -m path`.
void export_gguf(const MicroLM& model, const MicroLMConfig& config, const BpeTokenizer& tokenizer,
                 const std::string& path, GgmlType type = GgmlType::f32,
                 const std::string& name = "depthgrad");

// The Q/K row order llama.cpp's RoPE expects: depthgrad rotates the pairs (i, i + d/2) of each
// d-wide head (rotate-half), llama.cpp's `llama` the adjacent pairs (2i, 2i + 1), so GGUF row
// head·d + 2i + j is depthgrad row head·d + j·d/2 + i (j = 0, 1). `rows` is [heads·d, cols],
// row-major; the result has the same shape.
std::vector<float> permute_rows_for_llama_rope(const std::vector<float>& rows, int64_t heads,
                                               int64_t head_dim, int64_t cols);

}  // namespace dg
