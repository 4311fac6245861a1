// Wrong answer to div_backward: b read through detach(b). First derivatives are right; under
// create_graph the second derivatives through b (d²/db², d²/da db) are lost.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void div_backward(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Tensor b0 = detach(b);
  if (a.requires_grad()) accumulate_grad(a, div(g, b0));
  if (b.requires_grad()) accumulate_grad(b, neg(div(mul(g, out), b0)));
}

}  // namespace dg
