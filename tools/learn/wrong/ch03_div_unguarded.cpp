// Wrong answer to div_backward: both shares accumulated whether or not the input requires a
// gradient. A constant numerator or denominator (a normaliser, a count) gets a .grad it should not
// have, and the step computes −g·out/b for nothing.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  accumulate_grad(a, div(g, b));
  accumulate_grad(b, neg(div(mul(g, out), b)));
}

}  // namespace dg
