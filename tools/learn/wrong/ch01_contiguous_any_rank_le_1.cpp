// Wrong answer to is_contiguous_layout: any tensor of rank 0 or 1 is called contiguous, whatever
// its stride. A 1-D strided view (a column of a matrix, every other element, an expanded [1] to
// [n] with stride 0) is then read as if its elements sat side by side: sum of expand([1] -> [6])
// of 7 gives 7 + the five numbers after it in memory instead of 42.
#include "tensor/shape.h"

namespace dg {

bool is_contiguous_layout(const Shape& shape, const Shape& strides) {
  if (shape.size() <= 1) return true;
  int64_t expected = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    if (shape[k] != 1 && strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

}  // namespace dg
