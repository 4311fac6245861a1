// Hugging Face model folders in and out. Import reads a GPT2LMHeadModel or LlamaForCausalLM folder
// (config.json; model.safetensors or shards listed by model.safetensors.index.json; tokenizer.json)
// as a standard-mode MicroLM: GPT-2's Conv1D weights are transposed and its fused c_attn split into
// q, k, v; Llama's weights are taken as they are (its rotate_half RoPE layout is depthgrad's, so no
// row is permuted). Export writes a standard-mode MicroLM in the names and layouts of one of those
// two classes. F32, BF16 and F16 weights are read, widened exactly to float32; export writes F32.
// Refused, with one line naming the field: other architectures or model types, activations other
// than GPT-2's gelu_new/gelu and Llama's silu, rope_scaling, biases in Llama, sliding windows,
// config fields the importer does not know, padded vocabularies (the tokenizer must have
// vocab_size ids), and tokenizers whose normalizer, pre-tokenizer, model or decoder depthgrad's BPE
// does not reproduce exactly (train/lm/text/bpe.h names them). It does not download, quantise, read
// pytorch_model.bin or export the AttnRes modes (no Hugging Face class computes them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/lm/run_config.h"

namespace dg {

struct HfImport {
  std::string architecture;  // GPT2LMHeadModel or LlamaForCausalLM
  RunConfig config;          // the model section from config.json; training and data defaults
  std::vector<NamedTensor> weights;  // depthgrad's names, float32, in the model's parameter order
  std::string tokenizer_json;        // tokenizer.json as read (checked by BpeTokenizer::from_json)
  int64_t bos_token_id = -1, eos_token_id = -1;  // from config.json, -1 when absent
};

struct HfImportOptions {
  // Context of the imported model (seq_len): 0 = the checkpoint's own (n_positions for GPT-2,
  // max_position_embeddings for Llama, capped at 2048 for RoPE models so the K/V cache stays
  // small). Learned positions need exactly n_positions.
  int64_t seq_len = 0;
};

// Reads and checks the folder `dir`; throws std::runtime_error naming the file and field.
HfImport read_hf_model(const std::string& dir, const HfImportOptions& options = {});

// The depthgrad model folder of an import: `out`/model.safetensors (the weights with
// depthgrad.config, depthgrad.tokenizer_sha256, depthgrad.imported_from, depthgrad.tokenizer =
// "given" (encode with the tokenizer.json beside, never train one) and the token ids as
// metadata), `out`/tokenizer.json (the same bytes) and `out`/config.json (the run config), which
// `depthgrad generate`, `eval` and `train --init-from` read.
void write_imported_model(const HfImport& model, const std::string& out);

// The Hugging Face class a model config exports to, or throws std::invalid_argument naming what
// fits neither: "LlamaForCausalLM" for RMSNorm + SwiGLU + RoPE without biases or learned
// positions, "GPT2LMHeadModel" for LayerNorm + gelu_tanh/gelu + learned positions + biases, no
// RoPE and no grouped-query attention. Only the standard residual mode exports.
std::string hf_architecture_for(const MicroLMConfig& model);

// Writes `dir`/config.json, model.safetensors (F32, the class's tensor names and layouts; a tied
// head is not written, as transformers saves it), tokenizer.json (`tokenizer_json` as given) and
// generation_config.json for `model`'s weights. bos/eos ids of -1 are left out. Returns the class.
std::string export_hf(const Module& model, const MicroLMConfig& config,
                      const std::string& tokenizer_json, int64_t bos_token_id, int64_t eos_token_id,
                      const std::string& dir);

}  // namespace dg
