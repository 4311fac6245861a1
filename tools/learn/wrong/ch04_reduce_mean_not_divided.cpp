// Wrong answer to reduce_backward: mean's gradient not divided by the count of the elements it
// averaged (the `average` flag ignored): mean's backward then equals sum's, count times too big.
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

Tensor reduce_backward(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes,
                       bool) {
  Shape keep = input_shape;
  for (int64_t k : axes) keep[k] = 1;
  return expand(reshape(g, keep), input_shape);
}

}  // namespace dg
