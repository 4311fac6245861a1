// Wrong answer to contiguous_strides: the running product is updated before it is stored, so
// every stride includes its own axis's size: [2, 3, 4] gets [24, 12, 4] instead of [12, 4, 1].
#include "tensor/shape.h"

namespace dg {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    running *= shape[k];
    strides[k] = running;
  }
  return strides;
}

}  // namespace dg
