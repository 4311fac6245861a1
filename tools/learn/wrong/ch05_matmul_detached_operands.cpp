// Wrong answer to matmul_backward_recorded: dA = g·detach(B)ᵀ and dB = detach(A)ᵀ·g. First
// derivatives are right; under create_graph they no longer depend on A and B, so every second
// derivative through matmul (the cross term d²/dA dB) is lost.
#include "autograd/grad_sink.h"
#include "autograd/op_steps.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, matmul(g, transpose(detach(b), -1, -2)));
  if (b.requires_grad()) accumulate_grad(b, matmul(transpose(detach(a), -1, -2), g));
}

}  // namespace dg
