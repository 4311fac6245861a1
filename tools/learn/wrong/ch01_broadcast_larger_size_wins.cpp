// Wrong answer to broadcast_shapes: the output size of an axis is the larger of the two. Right
// for 1 against n, wrong for a size-0 axis against 1: torch broadcasts [0] with [1] to [0] (the
// 1 stretches to 0), this gives [1] and the op writes an element that does not exist.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "tensor/shape.h"

namespace dg {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(
          fmt::format("{}: shapes {} and {} cannot be broadcast", op, shape_str(a), shape_str(b)));
    out[k] = std::max(da, db);
  }
  return out;
}

}  // namespace dg
