// PEFT's LoRA adapter folders (adapter_config.json + adapter_model.safetensors) for the two Hugging
// Face classes depthgrad imports (train/lm/hf_model.h), written and read over an imported model
// with nn/lora.h's adapters. It maps PEFT's module names onto depthgrad's Linears:
//
//   LlamaForCausalLM   model.layers.L.self_attn.{q,k,v,o}_proj   blocks.L.attention.{q,k,v,output}
//                      model.layers.L.mlp.{gate,up,down}_proj     blocks.L.ffn.{gate,up,down}
//   GPT2LMHeadModel    transformer.h.L.attn.c_attn                blocks.L.attention.{q,k,v}: one
//                                                                 shared A, lora_B = [B_q; B_k;
//                                                                 B_v]
//                      transformer.h.L.attn.c_proj                blocks.L.attention.output
//                      transformer.h.L.mlp.c_fc / mlp.c_proj      blocks.L.ffn.up / ffn.down
//
// A target t adapts the module named N when N == t or N ends with "." + t (PEFT's rule for a list
// of target_modules), so "c_proj" adapts attn.c_proj and mlp.c_proj, and "h.1.attn.c_attn" only
// layer 1's. Keys are "base_model.model.<N>.lora_A.weight" [r, in] and ".lora_B.weight" [out, r]
// (PEFT's in Linear layout for GPT-2's Conv1D too: its fan_in_fan_out, true in a GPT-2 config,
// transposes B·A when merging into the [in, out] Conv1D weight).
//
//   dg::HfImport hf = dg::read_hf_model("llama-folder");
//   ... a MicroLM of hf.config.model, load_state_dict(hf.weights) ...
//   dg::PeftLoraConfig lora{.r = 8, .lora_alpha = 16, .target_modules = {"q_proj", "v_proj"}};
//   dg::apply_peft_lora(model, hf.config.model, lora);       // before any optimiser
//   ... train ...
//   dg::save_peft_adapter(model, hf.config.model, lora, "adapter-dir");
//   // later, onto a fresh import: dg::load_peft_adapter(model, hf.config.model, "adapter-dir");
//
// Read, but refused naming the field (what depthgrad does not compute): peft_type other than LORA,
// task_type other than CAUSAL_LM (or null), use_dora, bias other than "none", lora_bias,
// modules_to_save, rank_pattern / alpha_pattern not empty, layers_to_transform, exclude_modules,
// layer_replication, trainable_token_indices, megatron_config, target_modules as a regular
// expression (a string); in the tensors: a key that is no adapted module's, a missing key, a
// shape that does not fit, a dtype other than F32, BF16 and F16. use_rslora is computed. Not
// here: adapter_model.bin (pickle), several adapters, LoRA on embeddings or the LM head.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "nn/lora.h"

namespace dg {

// A module of a Hugging Face class that PEFT adapts, and the depthgrad Linears it is.
struct PeftModule {
  std::string name;                  // in the HF model: "model.layers.0.self_attn.q_proj"
  std::vector<std::string> linears;  // depthgrad's: {"blocks.0.attention.q"}; c_attn: q, k, v
  bool conv1d = false;               // GPT-2's Conv1D (weight [in, out]): fan_in_fan_out
};

// The settings of adapter_config.json that depthgrad computes (the rest are written as PEFT's
// defaults and refused when read otherwise).
struct PeftLoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  bool use_rslora = false;
  std::vector<std::string> target_modules;
  std::string base_model_name_or_path;  // written as given; not checked when read
  lora::Options options() const;        // for nn/lora.h (targets left empty: names are mapped)
};

// The adaptable modules of the class `model` exports to (hf_architecture_for), in module order.
std::vector<PeftModule> peft_modules(const MicroLMConfig& model);
// The last names of those modules: the targets that adapt every layer (q_proj, ... / c_attn, ...).
std::vector<std::string> peft_target_names(const MicroLMConfig& model);
// The modules `targets` adapt. Throws std::invalid_argument "<what>: '<t>' matches no module of
// <class> PEFT adapts here (valid: ...)" for a target that adapts nothing, or no targets.
std::vector<PeftModule> peft_matched_modules(const MicroLMConfig& model,
                                             const std::vector<std::string>& targets,
                                             const std::string& what = "target_modules");

// Adds `config`'s adapters to `model` (lora::apply on each matched Linear, lora::apply_shared on
// c_attn's q, k, v) and freezes the rest; before any optimiser. Returns the counts.
lora::Summary apply_peft_lora(Module& model, const MicroLMConfig& model_config,
                              const PeftLoraConfig& config);

// adapter_config.json's text as PEFT's save_pretrained writes it (every LoraConfig field of PEFT
// 0.15, keys sorted, indent 2; fan_in_fan_out true for GPT-2, inference_mode true).
std::string peft_adapter_config_json(const MicroLMConfig& model, const PeftLoraConfig& config);
// Reads an adapter_config.json's text (`source` names it in errors); refuses as above.
PeftLoraConfig parse_peft_adapter_config(const std::string& text, const std::string& source);

// The adapter's tensors as PEFT names them, float32, in module order (A then B of each module).
std::vector<NamedTensor> peft_adapter_tensors(Module& model, const MicroLMConfig& model_config,
                                              const PeftLoraConfig& config);
// Writes `dir`/adapter_config.json and `dir`/adapter_model.safetensors (F32, metadata
// {"format": "pt"} as PEFT's), each atomically; `dir` must exist.
void save_peft_adapter(Module& model, const MicroLMConfig& model_config,
                       const PeftLoraConfig& config, const std::string& dir);
// Reads `dir`'s adapter, checks every key and shape against `model_config`, then adds the
// adapters to `model` (apply_peft_lora) and copies A and B in. Nothing changes when a check
// fails. Returns the config read.
PeftLoraConfig load_peft_adapter(Module& model, const MicroLMConfig& model_config,
                                 const std::string& dir);

}  // namespace dg
