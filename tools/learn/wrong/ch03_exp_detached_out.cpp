// Wrong answer to exp_backward: multiplied by detach(out). The first derivative is right; under
// create_graph it does not depend on a any more, so d²/da² exp(a) comes out 0 instead of exp(a).
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void exp_backward(const Tensor& g, const Tensor& a, const Tensor& out) {
  accumulate_grad(a, mul(g, detach(out)));
}

}  // namespace dg
