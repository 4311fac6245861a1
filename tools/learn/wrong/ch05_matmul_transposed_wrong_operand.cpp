// Wrong answer to matmul_backward_recorded: dA = gᵀ·B and dB = A·gᵀ, the transpose put on g
// instead of on the other operand. For square matrices the shapes agree and the values are wrong;
// otherwise the matmul refuses the shapes.
#include "autograd/grad_sink.h"
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, matmul(transpose(g, -1, -2), b));
  if (b.requires_grad()) accumulate_grad(b, matmul(a, transpose(g, -1, -2)));
}

}  // namespace dg
