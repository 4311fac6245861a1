// Wrong answer to softmax_input_grad: the saved output read through detach(out). The first
// derivative is right; under create_graph it no longer depends on x through y, so the second
// derivatives of softmax and log_softmax come out wrong.
#include "autograd/op_steps.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

Tensor softmax_input_grad(const Tensor& g, const Tensor& out_with_graph, int64_t axis, bool log) {
  const Tensor out = detach(out_with_graph);
  if (log) return sub(g, mul(exp(out), sum(g, {axis}, true)));
  return mul(out, sub(g, sum(mul(g, out), {axis}, true)));
}

}  // namespace dg
