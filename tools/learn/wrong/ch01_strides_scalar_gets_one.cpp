// Wrong answer to contiguous_strides: a scalar (shape []) gets strides [1], one stride for an axis
// it does not have. torch's x.stride() of a 0-D tensor is (); a rank-1 stride list for a rank-0
// shape breaks every function that pairs shape[k] with strides[k].
#include "tensor/shape.h"

namespace dg {

Shape contiguous_strides(const Shape& shape) {
  if (shape.empty()) return {1};
  Shape strides(shape.size());
  int64_t running = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    strides[k] = running;
    running *= shape[k];
  }
  return strides;
}

}  // namespace dg
