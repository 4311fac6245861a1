// Shape and stride arithmetic (see shape.h for the model). contiguous_strides,
// is_contiguous_layout and broadcast_shapes are exercises of the learner's path's chapter 1
// (tensor/learn-01-tensors.md), broadcast_reduction_axes of chapter 2
// (autograd/learn-02-graph.md): weak definitions (tensor/exercise.h) a learner's may replace.
#include "tensor/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "tensor/exercise.h"

namespace dg {

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

DG_EXERCISE Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    strides[k] = running;
    running *= shape[k];
  }
  return strides;
}

DG_EXERCISE bool is_contiguous_layout(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    if (shape[k] != 1 && strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* op) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw std::invalid_argument(
        fmt::format("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank));
  return a;
}

Shape resolve_reshape(const Shape& shape, int64_t numel, const std::string& what) {
  Shape target = shape;
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < target.size(); ++k) {
    if (target[k] == -1) {
      if (infer >= 0) throw std::invalid_argument("reshape: only one size may be -1");
      infer = static_cast<int64_t>(k);
    } else {
      known *= target[k];
    }
  }
  if (infer >= 0 && known > 0) target[infer] = numel / known;
  if (shape_numel(target) != numel)
    throw std::invalid_argument(
        fmt::format("reshape: cannot view tensor {} as shape {}", what, shape_str(shape)));
  return target;
}

DG_EXERCISE Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(
          fmt::format("{}: shapes {} and {} cannot be broadcast", op, shape_str(a), shape_str(b)));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

DG_EXERCISE std::vector<int64_t> broadcast_reduction_axes(const Shape& target,
                                                          const Shape& broadcast) {
  const int64_t lead = static_cast<int64_t>(broadcast.size() - target.size());
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < static_cast<int64_t>(broadcast.size()); ++k)
    if (k < lead || (target[k - lead] == 1 && broadcast[k] != 1)) axes.push_back(k);
  return axes;
}

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t k = 0; k < shape.size(); ++k)
    out[lead + k] = (shape[k] == 1 && target[lead + k] != 1) ? 0 : strides[k];
  return out;
}

}  // namespace dg
