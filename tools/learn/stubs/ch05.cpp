// Chapter 5 of the learner's path (autograd/learn-05-matmul-linear.md): your versions of two
// library functions. Replace each body with your own; `make learn CHAPTER=5` builds this file
// into the chapter's program, where it replaces the library's function everywhere the library
// calls it, and grades it. The declarations, with what each function must do, are in
// autograd/op_steps.h; the GEMM is gemm() in tensor/kernels_matmul.h (beside add_column_sums),
// the gradient buffers GradSink in autograd/grad_sink.h.
#include "autograd/grad_sink.h"   // GradSink, grad_of
#include "autograd/op_steps.h"    // the declarations; MatrixLayout, gemm, add_column_sums
#include "autograd/ops.h"         // matmul, transpose
#include "tensor/gemm_kernels.h"  // Bf16Rounded
#include "tools/learn/grade.h"

namespace dg {

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& x_rows, int64_t ldx, const Tensor& w,
                     const MatrixLayout& w_layout, const uint16_t* x_rows_bf16) {
  dg::learn::not_written("linear_backward");
}

void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b) {
  dg::learn::not_written("matmul_backward_recorded");
}

}  // namespace dg
