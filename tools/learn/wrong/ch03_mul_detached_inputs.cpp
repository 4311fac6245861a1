// Wrong answer to mul_backward: the gradients built from detach(a) and detach(b). The first
// derivative is right, but under create_graph it no longer depends on a and b, so second
// derivatives lose their cross terms: d²/dx² of x·x + exp(x) comes out 4.48, 0.135 instead of
// 6.48, 2.14.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, mul(g, detach(b)));
  if (b.requires_grad()) accumulate_grad(b, mul(g, detach(a)));
}

}  // namespace dg
