// Wrong answer to exp_backward: the local derivative exp(a) accumulated without the incoming
// gradient g (the chain rule's first factor dropped). Right only when the loss is exp(a) summed.
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void exp_backward(const Tensor& g, const Tensor& a, const Tensor& out) { accumulate_grad(a, out); }

}  // namespace dg
