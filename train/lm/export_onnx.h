// The language model as an ONNX file: input_ids [batch, sequence] (int64) to logits
// [batch, sequence, vocab], any residual mode, traced by dg::onnx::export_model
// (train/io/onnx/export.h). `depthgrad export --to onnx` writes it.
#pragma once
#include <cstdint>
#include <string>

#include "nn/lm/micro_lm.h"

namespace dg {

struct LmOnnxOptions {
  int64_t sequence = 0;           // the traced length; 0: the model's seq_len
  bool dynamic_sequence = false;  // the sequence axis free (up to the length traced)
  int64_t opset = 17;
};

// Writes `model` to `path` (atomically). The batch axis is always dynamic. With a dynamic
// sequence, RoPE's tables (and learned positions) cover the traced length: trace at the longest
// length the file will run (the default, seq_len). Throws std::invalid_argument for a sequence
// outside 1..seq_len.
void export_lm_onnx(MicroLM& model, const std::string& path, const LmOnnxOptions& options = {});

}  // namespace dg
