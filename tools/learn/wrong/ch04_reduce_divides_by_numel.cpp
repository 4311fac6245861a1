// Wrong answer to reduce_backward: mean's gradient divided by the input's element count, not by
// the count of the reduced axes. Right for a mean of every element; for mean over axes 0 and 2 of
// [2, 3, 4] it divides by 24 instead of 8.
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

Tensor reduce_backward(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes,
                       bool average) {
  Shape keep = input_shape;
  for (int64_t k : axes) keep[k] = 1;
  Tensor gk = reshape(g, keep);
  if (average) gk = scale(gk, 1.0 / static_cast<double>(shape_numel(input_shape)));
  return expand(gk, input_shape);
}

}  // namespace dg
