// The examples' models exported by dg::onnx::export_model (train/io/onnx/export.h), written as
// cases for the real clients (tests/onnx/onnx_cases.h): the MLP, the Fashion-MNIST CNN in eval
// mode, the character LSTM, a TransformerEncoder classifier and the GPT-2-style example, each with
// depthgrad's outputs at the traced batch and at another one (the batch axis dynamic; GPT-2's
// sequence axis too). ONNX Runtime must reproduce them within 1e-5 relative (float32).
#pragma once
#include <string>

namespace dg::onnx_cases {

// Writes <dir>/<name>.onnx and the case of each model into dir's manifest.
void write_exported_examples(const std::string& dir);

// Every gradient-check row of every op family (autograd/gradcheck.h), its inputs in float32,
// exported and written as a case "op_<n>": each op's mapping checked by ONNX Runtime. The rows
// of ops with no ONNX form (losses, batch statistics, masked_select, index_put, circular pads,
// uneven adaptive pools, the quantized frozen linear) must be refused with OnnxError; any other
// refusal, or a refused row that starts to export, throws. Returns the number of cases written.
int write_op_row_cases(const std::string& dir);

}  // namespace dg::onnx_cases
