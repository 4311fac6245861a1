// Wrong answer to contiguous_strides: column-major (Fortran) strides, the first axis moving
// fastest: [2, 3, 4] gets [1, 2, 6] instead of torch's row-major [12, 4, 1]. Every reshape and
// every kernel that walks a tensor row by row then reads the wrong elements.
#include "tensor/shape.h"

namespace dg {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    strides[k] = running;
    running *= shape[k];
  }
  return strides;
}

}  // namespace dg
