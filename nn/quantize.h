// A Linear's frozen weight stored in bf16 or int8 (tensor/quantized_matrix.h) instead of float32:
// for the base of a LoRA model and for inference. quantize_frozen walks a model and, for each
// Linear it is asked to, quantizes the weight, removes the float32 parameter (its storage is freed
// once nobody else holds it) and keeps the packed form as buffers, so the state_dict says what it
// is: "<path>.weight_int8" (uint8 [out, in], the int8 bytes) and "<path>.weight_scale" (float32
// [out]), or "<path>.weight_bf16" (uint8 [out, 2·in], the bf16 bytes). The bias stays a float32
// parameter. The layer's plain() turns false, so fused callers run its forward (quantized_linear),
// and cached decoding (nn/lm/decode.h) reads the packed rows through quantized_gemv.
// Not here: embeddings (a MicroLM's token embedding, and so a tied head, stay float32), training
// the weight (it gets no gradient), loading a float32 checkpoint into a quantized model (load it
// first, then quantize).
//
//   MicroLM model(config);                                  // load or train its weights first
//   quantize_frozen(model, QuantFormat::int8);              // every Linear, before the optimiser
//   quantize_frozen(model, QuantFormat::bf16, [](const std::string& path, const Linear&) {
//     return path.ends_with(".q") || path.ends_with(".v");  // only some of them
//   });
#pragma once
#include <functional>
#include <string>

#include "nn/layers.h"
#include "tensor/quantized_matrix.h"

namespace dg {

// Stores layer's float32 weight as `format` (see above). Throws std::logic_error when the layer is
// already quantized or flat_parameters() was made on it or a module it belongs to (the optimiser's
// flat buffers would keep the weight), std::invalid_argument when the weight is not float32 or has
// a non-finite value (quantize_matrix names it).
void quantize_linear(Linear& layer, QuantFormat format);

// Which Linears quantize_frozen quantizes: called with each Linear's dotted path from the root
// ("blocks.0.attention.q", "head") and the layer. Empty: every Linear not quantized yet.
using LinearFilter = std::function<bool(const std::string& path, const Linear& layer)>;
// quantize_linear on every chosen Linear below root (root included), depth first in registration
// order; returns how many it quantized.
int64_t quantize_frozen(Module& root, QuantFormat format, const LinearFilter& which = {});

// Bytes of a module's weights as stored: its parameters' and persistent buffers' bytes (a tensor
// shared under two names counts once): what quantizing saves, for reports and tests.
int64_t stored_bytes(const Module& root);

}  // namespace dg
