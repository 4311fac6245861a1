// TensorProto <-> Tensor (see tensors.h).
#include "train/io/onnx/tensors.h"

#include <fmt/format.h>

#include <cstring>

namespace dg::onnx {

int32_t elem_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return static_cast<int32_t>(ElemType::float32);
    case DType::f64:
      return static_cast<int32_t>(ElemType::float64);
    case DType::i32:
      return static_cast<int32_t>(ElemType::int32);
    case DType::i64:
      return static_cast<int32_t>(ElemType::int64);
    case DType::b8:
      return static_cast<int32_t>(ElemType::boolean);
    case DType::u8:
      return static_cast<int32_t>(ElemType::uint8);
  }
  return 0;
}

DType dtype_of(int32_t elem_type, const std::string& what) {
  switch (static_cast<ElemType>(elem_type)) {
    case ElemType::float32:
      return DType::f32;
    case ElemType::float64:
      return DType::f64;
    case ElemType::int32:
      return DType::i32;
    case ElemType::int64:
      return DType::i64;
    case ElemType::boolean:
      return DType::b8;
    case ElemType::uint8:
      return DType::u8;
    default:
      break;
  }
  throw OnnxError(
      fmt::format("{} has element type {}, which depthgrad does not have (it reads "
                  "float32, float64, int32, int64, bool and uint8)",
                  what, elem_type_name(elem_type)));
}

namespace {
// The first byte of a contiguous tensor's values.
char* first_byte(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
}
}  // namespace

TensorProto to_tensor_proto(const std::string& name, const Tensor& t) {
  TensorProto proto;
  proto.name = name;
  proto.dims = t.shape();
  proto.data_type = elem_type_of(t.dtype());
  const Tensor c = t.contiguous();
  proto.raw_data.assign(first_byte(c), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  return proto;
}

namespace {

// Copies `count` values of type From into dst as type To (the typed fields of TensorProto).
template <class To, class From>
void copy_values(const std::vector<From>& values, void* dst) {
  To* out = static_cast<To*>(dst);
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<To>(values[i]);
}

// The number of values a typed field holds for this dtype, and a copy of them into dst.
size_t typed_count(const TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::f32:
      return p.float_data.size();
    case DType::f64:
      return p.double_data.size();
    case DType::i64:
      return p.int64_data.size();
    default:
      return p.int32_data.size();  // int32, bool, uint8
  }
}
void copy_typed(const TensorProto& p, DType dtype, void* dst) {
  switch (dtype) {
    case DType::f32:
      copy_values<float>(p.float_data, dst);
      break;
    case DType::f64:
      copy_values<double>(p.double_data, dst);
      break;
    case DType::i64:
      copy_values<int64_t>(p.int64_data, dst);
      break;
    case DType::i32:
      copy_values<int32_t>(p.int32_data, dst);
      break;
    case DType::b8:
      copy_values<bool>(p.int32_data, dst);
      break;
    case DType::u8:
      copy_values<uint8_t>(p.int32_data, dst);
      break;
  }
}

}  // namespace

Tensor from_tensor_proto(const TensorProto& proto, const std::string& source) {
  const std::string what =
      fmt::format("{}: tensor '{}'", source, proto.name.empty() ? "(unnamed)" : proto.name);
  if (proto.external)
    throw OnnxError(what + " keeps its values in an external file, which is not supported");
  const DType dtype = dtype_of(proto.data_type, what);
  int64_t numel = 1;
  for (int64_t d : proto.dims) {
    if (d < 0) throw OnnxError(fmt::format("{} has a negative dimension {}", what, d));
    if (d > 0 && numel > (int64_t{1} << 40) / d)
      throw OnnxError(what + " has more than 2^40 elements");
    numel *= d;
  }
  Tensor t = Tensor::empty(proto.dims, dtype);
  const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  if (!proto.raw_data.empty()) {
    if (proto.raw_data.size() != bytes)
      throw OnnxError(fmt::format("{} of shape {} needs {} bytes of raw data, has {}", what,
                                  shape_str(proto.dims), bytes, proto.raw_data.size()));
    if (bytes) std::memcpy(first_byte(t), proto.raw_data.data(), bytes);
    return t;
  }
  if (typed_count(proto, dtype) != static_cast<size_t>(numel))
    throw OnnxError(fmt::format("{} of shape {} needs {} values, has {}", what,
                                shape_str(proto.dims), numel, typed_count(proto, dtype)));
  copy_typed(proto, dtype, first_byte(t));
  return t;
}

}  // namespace dg::onnx
