// Wrong answer to broadcast_shapes: the shorter shape is padded with 1s on the right (aligned at
// the first axis) instead of the left. torch aligns the last axes: [3, 1] with [4] is [3, 4];
// aligned left it compares 3 with 4 and refuses a valid pair.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "tensor/shape.h"

namespace dg {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < a.size() ? a[k] : 1;
    int64_t db = k < b.size() ? b[k] : 1;
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(
          fmt::format("{}: shapes {} and {} cannot be broadcast", op, shape_str(a), shape_str(b)));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace dg
