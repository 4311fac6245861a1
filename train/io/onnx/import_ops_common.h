// Helpers shared by the importer's op families (import_ops*.cpp); not for users.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"
#include "train/io/onnx/import_ops.h"

namespace dg::onnx {

// numpy's (ONNX's multidirectional) broadcast of two shapes; refused naming both.
Shape broadcast_shapes(const NodeRun& node, const Shape& a, const Shape& b);
// Refuses a shape computed from a graph's values (ConstantOfShape, Expand, Tile, Pad, Range) with
// a negative dim or more than 2^30 elements: a file cannot make the importer allocate without
// bound.
void check_output_size(const NodeRun& node, const Shape& shape);
// Refuses a size read from a file (a kernel, stride, dilation, pad or repeat) outside
// [-2^30, 2^30], so that the arithmetic on it cannot overflow; gives it back.
int64_t bounded(const NodeRun& node, int64_t value, const char* what);
// An integer (or bool) tensor's values as int64, in row-major order.
std::vector<int64_t> int64_values(const Tensor& t);

}  // namespace dg::onnx
