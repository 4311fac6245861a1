// Wrong answer to mul_backward: a gradient for both inputs whether or not they require one. Every
// gradient that matters is right, but a constant factor (a mask, a loss's weights) gets a .grad it
// should not have (torch leaves it None) and each step pays a product the size of that input.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  accumulate_grad(a, mul(g, b));
  accumulate_grad(b, mul(g, a));
}

}  // namespace dg
