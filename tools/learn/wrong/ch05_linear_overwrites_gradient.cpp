// Wrong answer to linear_backward: the GEMMs write dx and dW with beta 0 (overwrite) instead of
// the sink's beta (add to a gradient already there). Right for a weight used once; a weight shared
// by two linears (a tied head) keeps only the last backward's contribution.
#include "autograd/grad_sink.h"
#include "autograd/op_steps.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/gemm_kernels.h"

namespace dg {

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const Tensor& x_rows, int64_t ldx, const Tensor& w,
                     const MatrixLayout& w_layout, const uint16_t* x_rows_bf16) {
  const int64_t out_features = weight.size(0), in = weight.size(1);
  const int64_t R = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  dispatch_float(dy.dtype(), "linear", [&]<class T>() {
    const T* pdy = dy.data<T>();
    if (dy.numel() == 0) {
      for (const Tensor& t : {x, weight, bias})
        if (t.requires_grad()) grad_of(t);
      return;
    }
    const bool both = x.requires_grad() && weight.requires_grad() && in > 0;
    const Bf16Rounded dy16(pdy, both ? R : 0, out_features, out_features);
    if (x.requires_grad() && in > 0) {
      GradSink sink(x);
      gemm(false, w_layout.trans, R, in, out_features, T(1), pdy, out_features, w.data<T>(),
           w_layout.ld, T(0), sink.data<T>(), in, dy16.data());
      sink.finish();
    }
    if (weight.requires_grad() && in > 0) {
      GradSink sink(weight);
      gemm(true, false, out_features, in, R, T(1), pdy, out_features,
           x_rows.defined() ? x_rows.data<T>() : nullptr, ldx, T(0), sink.data<T>(), in,
           dy16.data(), x_rows_bf16);
      sink.finish();
    }
    if (bias.defined() && bias.requires_grad()) {
      GradSink sink(bias);
      sink.zero_if_fresh();
      add_column_sums(pdy, R, out_features, out_features, sink.data<T>());
      sink.finish();
    }
  });
}

}  // namespace dg
