// Wrong answer to mul_backward: only a's gradient is written. b (a weight, a gate) never learns,
// and x * x gets half its gradient (x only through the first input).
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, mul(g, b));
}

}  // namespace dg
