// Wrong answer to div_backward: da = g·b, as if the op were a multiplication. d(a/b)/da is 1/b.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.requires_grad()) accumulate_grad(a, mul(g, b));
  if (b.requires_grad()) accumulate_grad(b, neg(div(mul(g, out), b)));
}

}  // namespace dg
