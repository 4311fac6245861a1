// Wrong answer to softmax_input_grad: log_softmax's backward uses its output y = log p as if it
// were p: g − y·Σ g instead of g − exp(y)·Σ g. softmax's branch is right, so only log_softmax's
// checks catch it.
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

Tensor softmax_input_grad(const Tensor& g, const Tensor& out, int64_t axis, bool log) {
  if (log) return sub(g, mul(out, sum(g, {axis}, true)));
  return mul(out, sub(g, sum(mul(g, out), {axis}, true)));
}

}  // namespace dg
