// Wrong answer to div_backward: d(a/b)/db written as +a/b² (the minus sign of the quotient rule
// forgotten). b then moves the wrong way.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.requires_grad()) accumulate_grad(a, div(g, b));
  if (b.requires_grad()) accumulate_grad(b, div(mul(g, out), b));
}

}  // namespace dg
