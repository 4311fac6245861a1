// Shapes, strides and broadcasting: the index arithmetic of depthgrad in one small file.
//
// A tensor's element (i0, i1, ..., in) lives at  offset + i0*stride[0] + ... + in*stride[n]
// in its storage. A contiguous (row-major) tensor has stride[n] = 1 and
// stride[k] = stride[k+1] * shape[k+1]. Views change shape/strides/offset and never copy:
//   transpose swaps two strides; narrow moves the offset; expand sets stride 0 on a size-1 axis.
// Broadcasting follows numpy: align shapes at the right; each pair of sizes must be equal or 1.
// This file does not allocate storage or know about dtypes.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace dg {

using Shape = std::vector<int64_t>;

// "[4, 64, 512]"
std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);
// Row-major strides for `shape`.
Shape contiguous_strides(const Shape& shape);
// Resolves a possibly negative axis (-1 = last) against `rank`; throws naming `op` when out of
// range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
// numpy broadcasting of two shapes; throws "op: shapes [..] and [..] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that read a tensor of `shape`/`strides` as if it had the larger `target` shape
// (stride 0 on broadcast axes). `shape` must broadcast to `target`.
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace dg
