// Wrong answer to exp_backward: g·a instead of g·exp(a) (the derivative of exp confused with the
// power rule's). exp's derivative is itself: the saved output.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void exp_backward(const Tensor& g, const Tensor& a, const Tensor& out) {
  accumulate_grad(a, mul(g, a));
}

}  // namespace dg
