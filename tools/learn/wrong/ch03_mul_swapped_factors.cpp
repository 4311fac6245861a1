// Wrong answer to mul_backward: each input's gradient multiplied by itself instead of by the
// other input (g·a for a). d(ab)/da is b: the product rule swaps the factors.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, mul(g, a));
  if (b.requires_grad()) accumulate_grad(b, mul(g, b));
}

}  // namespace dg
