// What the two GGUF exporters share (train/lm/export_gguf.cpp, the model file, and
// train/lm/export_gguf_lora.cpp, the LoRA adapter file): the architecture a config fits, the
// llama tensor names, the options' checks and the file-type keys. Not a public header.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "train/lm/export_gguf.h"

namespace dg::gguf_export {

// Throws std::invalid_argument("GGUF export: " + why).
[[noreturn]] void refuse(const std::string& why);

enum class GgufArch { llama, gpt2 };
// The llama.cpp architecture a config fits; throws naming the fields that stop it.
GgufArch architecture_of(const MicroLMConfig& config);
// Throws naming the field where `config` is not `model`'s own.
void check_config_is_models(const MicroLM& model, const MicroLMConfig& config);

// depthgrad parameter name -> llama.cpp tensor name for `llama`; empty when it has none.
std::string llama_tensor_name(const std::string& name);

// Throws naming the first Linear under `module` (`path` its name) whose weight is quantized
// (nn/quantize.h: the float weight is gone).
void check_float_weights(const Module& module, const std::string& path);

// Throws for a type other than F32/F16/BF16 or a quantization other than Q8_0.
void check_export_options(const GgufExportOptions& options);
// general.file_type (and general.quantization_version when quantized) for `options`.
void add_file_type(const GgufExportOptions& options,
                   std::vector<std::pair<std::string, GgufValue>>& metadata);

}  // namespace dg::gguf_export
