// Named steps of some ops' forwards and backwards, pulled out of the ops that call them so that
// each reads as one formula: sum/mean's backward, softmax's recorded backward, the stable
// log-softmax of plain_cross_entropy, linear's backward GEMMs and matmul's recorded backward.
// Each is a learner's exercise (tools/learn/README.md: chapters 4 and 5), defined weak in its op's
// .cpp, and each is called once per op or per backward, never per element.
// These functions do not check their arguments: the ops that call them already have. Call the
// ops (autograd/ops.h), not these.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/kernels_matmul.h"  // MatrixLayout
#include "tensor/tensor.h"

namespace dg {

// ---- reductions and softmax (autograd/learn-04-reductions-softmax.md) ------------------------

// The gradient of sum (average = false) or mean (true) of a tensor of `input_shape` over `axes`
// (sorted, in range, distinct; the reduced output dropped them or kept them as 1): g [reduced]
// reshaped so that the reduced axes have size 1, divided by the number of elements each output
// summed for mean, and broadcast back to input_shape. ops_reduce.cpp's sum and mean call it.
Tensor reduce_backward(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes,
                       bool average);

// The gradient of softmax's (log = false) or log_softmax's (log = true) input from the incoming
// gradient g and the op's output `out` (both of the input's shape), along `axis` (in range),
// written with recorded ops so that it has a gradient itself (create_graph):
//   softmax      g_in = out ⊙ (g − Σ_axis g ⊙ out)
//   log_softmax  g_in = g − exp(out) ⊙ Σ_axis g
// The sums keep the axis (size 1) so that they broadcast back. ops_softmax.cpp calls it.
Tensor softmax_input_grad(const Tensor& g, const Tensor& out, int64_t axis, bool log);

// log p [N, C] of logits [N, C] along the classes, as recorded primitive ops and stable for any
// finite logits: each row's max m (a constant, no gradient) is subtracted first, so that every
// exp is of a value ≤ 0:  log p = (x − m) − log Σ_c exp(x − m). plain_cross_entropy calls it.
Tensor plain_log_softmax_rows(const Tensor& logits);

// ---- matmul and linear (autograd/learn-05-matmul-linear.md) ------------------------------------

// linear's backward (linear, linear_add, linear_rope) for dy [R, out] (contiguous; R the product
// of x's leading axes), by BLAS GEMMs that add straight into the gradients of the inputs that
// require one:
//   dx [R, in]    += dy [R, out] · W [out, in]
//   dW [out, in]  += dyᵀ [out, R] · x [R, in]
//   db [out]      += column sums of dy
// x_rows is x as the forward's GEMM read it ([R, in] row-major with row stride ldx) and w is W as
// it read it (w_layout: in place or transposed, tensor/kernels_matmul.h). In bf16 precision both
// GEMMs read dy rounded once (tensor/gemm_kernels.h's Bf16Rounded). x_rows_bf16 is not nullptr
// when linear kept x rounded to bf16 instead of x (bf16 precision: its values may be released,
// see RecordedNode::releases_values_of): x_rows is then undefined, and the dW GEMM reads the bf16
// rows as its B operand (gemm's b16), laid out as x_rows would be.
void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& x_rows, int64_t ldx, const Tensor& w,
                     const MatrixLayout& w_layout, const uint16_t* x_rows_bf16);

// matmul's (and bmm's) backward as recorded matmuls, for create_graph: for out = a @ b with
// g [batch.., M, N], grad(a) += g · bᵀ and grad(b) += aᵀ · g (transposes of the last two axes),
// for the inputs that require a gradient; accumulate_grad sums the batch axes a or b was
// broadcast over. ops_matmul.cpp calls it.
void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b);

}  // namespace dg
