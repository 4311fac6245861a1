// Wrong answer to matmul_backward_recorded: transpose(b, 0, 1) instead of the last two axes.
// Right for 2-D operands; for a batched b [3, 4, 2] it swaps the batch axis with the rows.
#include "autograd/grad_sink.h"
#include "autograd/op_steps.h"
#include "autograd/ops.h"

namespace dg {

void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, matmul(g, transpose(b, 0, 1)));
  if (b.requires_grad()) accumulate_grad(b, matmul(transpose(a, 0, 1), g));
}

}  // namespace dg
