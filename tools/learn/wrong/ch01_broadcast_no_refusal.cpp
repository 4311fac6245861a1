// Wrong answer to broadcast_shapes: sizes that differ and are both above 1 are not refused; the
// larger is taken. add of [3] and [4] then returns a [4] tensor that read past the end of the [3]
// instead of throwing as torch does.
#include <algorithm>

#include "tensor/shape.h"

namespace dg {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char*) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    out[k] = da == 1 ? db : db == 1 ? da : std::max(da, db);
  }
  return out;
}

}  // namespace dg
