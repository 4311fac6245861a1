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
// Row-major strides for `shape`: the last axis has stride 1, each earlier axis the product of
// the sizes after it ([2, 3, 4] -> [12, 4, 1]; [] -> []). Every new tensor gets these.
Shape contiguous_strides(const Shape& shape);
// True when a view of `shape` with `strides` reads its elements in row-major order with no gap,
// as torch's is_contiguous(): strides are contiguous_strides(shape), except that an axis of size
// 1 may have any stride (it is never stepped along). Tensor::is_contiguous() asks this.
bool is_contiguous_layout(const Shape& shape, const Shape& strides);
// Resolves a possibly negative axis (-1 = last) against `rank`; throws naming `op` when out of
// range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
// `shape` with its one -1 (if any) set to what makes it hold `numel` elements (reshape's and
// view's rule); throws std::invalid_argument "reshape: only one size may be -1", or "reshape:
// cannot view tensor <what> as shape [..]" when the sizes cannot hold numel elements.
Shape resolve_reshape(const Shape& shape, int64_t numel, const std::string& what);
// numpy broadcasting of two shapes: align them at the right; each pair of sizes must be equal or
// one of them 1 (a missing axis counts as 1); the result takes the size that is not 1 of each
// pair, or 1 ([3, 1] and [4] -> [3, 4]; [0] and [1] -> [0], as torch). Throws std::invalid_argument
// "op: shapes [..] and [..] cannot be broadcast" otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// The axes of `broadcast` (a shape that `target` broadcasts to) along which `target` was
// broadcast, ascending: the leading axes `target` lacks and the axes where `target` has size 1
// and `broadcast` does not ([4] into [3, 4] -> [0]; [3, 1] into [2, 3, 4] -> [0, 2]). A backward's
// gradient has the broadcast shape; accumulate_grad sums it over these axes to get the input's.
std::vector<int64_t> broadcast_reduction_axes(const Shape& target, const Shape& broadcast);
// Strides that read a tensor of `shape`/`strides` as if it had the larger `target` shape
// (stride 0 on broadcast axes). `shape` must broadcast to `target`.
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target);

}  // namespace dg
