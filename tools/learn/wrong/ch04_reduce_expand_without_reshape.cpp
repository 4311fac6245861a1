// Wrong answer to reduce_backward: g expanded to the input's shape as it is, without first putting
// the reduced axes back as size 1. g of sum over axis 1 of [2, 3, 4] is [2, 4]; broadcasting lines
// it up with the last axes, [3, 4], which it does not fit (and when it happens to fit, it spreads
// the gradient along the wrong axes).
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

Tensor reduce_backward(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes,
                       bool average) {
  int64_t count = 1;
  for (int64_t k : axes) count *= input_shape[k];
  Tensor gk = average ? scale(g, 1.0 / static_cast<double>(count)) : g;
  return expand(gk, input_shape);
}

}  // namespace dg
