// The gradient-check rows (autograd/gradcheck.h) as the ONNX tests export them: a row's inputs in
// float32 (integer and bool ones as they are, none requiring grad), and its function as the
// forward export_model traces. Shared by the cases ONNX Runtime runs (exported_examples.cpp) and
// the round trip through the importer (test_onnx_roundtrip.cpp).
#pragma once
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "train/io/onnx/export.h"

namespace dg::onnx_cases {

inline std::vector<Tensor> float32_row_inputs(const OpCase& row) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : row.make_inputs())
    inputs.push_back(t.defined() && is_floating(t.dtype()) ? to_dtype(detach(t), DType::f32)
                                                           : detach(t));
  return inputs;
}

// The row's function; `row` must outlive the forward.
inline onnx::ExportForward row_forward(const OpCase& row) {
  return [&row](const std::vector<Tensor>& in) { return std::vector<Tensor>{row.fn(in)}; };
}

}  // namespace dg::onnx_cases
