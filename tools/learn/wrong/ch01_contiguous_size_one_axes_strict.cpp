// Wrong answer to is_contiguous_layout: every axis's stride must equal the running product, size-1
// axes included. A size-1 axis is never stepped along, so its stride is free: [1, 3] with strides
// [99, 1] (a narrow to one row) is contiguous, and calling it not makes every such view copy.
#include "tensor/shape.h"

namespace dg {

bool is_contiguous_layout(const Shape& shape, const Shape& strides) {
  int64_t expected = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    if (strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

}  // namespace dg
