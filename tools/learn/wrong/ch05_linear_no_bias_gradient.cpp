// Wrong answer to linear_backward: the bias gradient is never written (db = Σ_rows dy
// forgotten). The bias keeps its initial value however long the model trains.
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
           w_layout.ld, sink.beta<T>(), sink.data<T>(), in, dy16.data());
      sink.finish();
    }
    if (weight.requires_grad() && in > 0) {
      GradSink sink(weight);
      gemm(true, false, out_features, in, R, T(1), pdy, out_features,
           x_rows.defined() ? x_rows.data<T>() : nullptr, ldx, sink.beta<T>(), sink.data<T>(), in,
           dy16.data(), x_rows_bf16);
      sink.finish();
    }
  });
}

}  // namespace dg
