// Tensors in and out of ONNX's TensorProto: float32, float64, int32, int64, bool and uint8 (the
// dtypes depthgrad has). Written as raw little-endian bytes (raw_data), as torch.onnx.export
// writes initializers; read from raw_data or any typed field a writer may use instead.
#pragma once
#include <string>

#include "tensor/tensor.h"
#include "train/io/onnx/proto.h"

namespace dg::onnx {

int32_t elem_type_of(DType dtype);
// The depthgrad dtype of an ONNX element type; throws OnnxError naming `what` and the type
// (float16, bfloat16, int8, strings... have no depthgrad dtype).
DType dtype_of(int32_t elem_type, const std::string& what);

// A contiguous copy of t's values under `name`.
TensorProto to_tensor_proto(const std::string& name, const Tensor& t);
// A new tensor (a leaf, not requiring grad) with the proto's values; `source` names the file in
// errors (a count of values that does not match the dims, a negative dim, external data).
Tensor from_tensor_proto(const TensorProto& proto, const std::string& source);

}  // namespace dg::onnx
