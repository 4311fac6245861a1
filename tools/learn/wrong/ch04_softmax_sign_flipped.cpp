// Wrong answer to softmax_input_grad: y⊙(Σ g⊙y − g), the subtraction the wrong way round. Every
// gradient through softmax changes sign: a model trained with it climbs its loss.
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

Tensor softmax_input_grad(const Tensor& g, const Tensor& out, int64_t axis, bool log) {
  if (log) return sub(mul(exp(out), sum(g, {axis}, true)), g);
  return mul(out, sub(sum(mul(g, out), {axis}, true), g));
}

}  // namespace dg
