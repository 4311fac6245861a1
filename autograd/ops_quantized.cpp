// quantized_linear: y = x · Ŵᵀ + bias over a frozen weight in bf16 or int8, Ŵ dequantised inside
// the kernels (tensor/quantized_matrix.h). Its backward gives dx = dy · Ŵ (the same kernels) and
// the bias's column sums; the weight gets no gradient, since it is frozen by construction (a
// LoRA base, an inference model). The backward reads only dy and Ŵ, so the node frees x's values
// once nothing else holds them (releases_values_of). No create_graph backward (refused, named).
// Checks: tests/test_quantized.cpp (dx against linear's on the dequantised weight, and a float64
// gradient check of x and the bias: float64 activations read Ŵ exactly).
#include <fmt/format.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_matmul.h"
#include "tensor/profile.h"
#include "tensor/quantized_matrix.h"

namespace dg {

namespace {
void check_quantized_linear(const Tensor& x, const QuantizedMatrix& weight, const Tensor& bias) {
  const char* op = "quantized_linear";
  weight.check(op);
  check_float(x, op);
  check_arg(x.dim() >= 1 && x.size(-1) == weight.cols, op, x,
            fmt::format("an input [.., {}] matching the {} weight [{}, {}]", weight.cols,
                        quant_format_name(weight.format), weight.rows, weight.cols));
  if (bias.defined())
    check_arg(
        bias.dim() == 1 && bias.size(0) == weight.rows && bias.dtype() == x.dtype(), op, bias,
        fmt::format("a bias [{}] of the input's dtype {}", weight.rows, dtype_name(x.dtype())));
}

// The node: dx = dy · Ŵ, dbias = Σ_rows dy. x is held weakly (its values are never read).
void record_quantized_linear(const Tensor& x, const QuantizedMatrix& weight, const Tensor& bias,
                             Tensor& y, int64_t R) {
  RecordedNode node = record(
      "quantized_linear", {x, bias}, y, [x_weak = WeakTensor(x), weight, bias, R](const Tensor& g) {
        const Tensor dy = kernel_input(g);  // [R, out]
        const Tensor x = x_weak.lock();
        dispatch_float(dy.dtype(), "quantized_linear", [&]<class T>() {
          if (x.defined() && x.requires_grad()) {
            Tensor dx = Tensor::empty(x.shape(), x.dtype());
            quantized_matmul_backward_input<T>(dy.data<T>(), R, weight.rows, weight, dx.data<T>(),
                                               weight.cols, false);
            accumulate_grad(x, dx);
          }
          if (bias.defined() && bias.requires_grad()) {
            Tensor db = Tensor::zeros({weight.rows}, dy.dtype());
            add_column_sums<T>(dy.data<T>(), R, weight.rows, weight.rows, db.data<T>());
            accumulate_grad(bias, db);
          }
        });
      });
  node.saves({});
  node.releases_values_of(0);
}
}  // namespace

Tensor quantized_linear(const Tensor& x, const QuantizedMatrix& weight, const Tensor& bias) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  check_quantized_linear(x, weight, bias);
  Shape out_shape = x.shape();
  out_shape.back() = weight.rows;
  const int64_t R = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)), N = weight.rows;
  const Tensor X = kernel_input(x);
  Tensor y = Tensor::empty(out_shape, x.dtype());
  dispatch_float(x.dtype(), "quantized_linear", [&]<class T>() {
    T* py = y.data<T>();
    if (bias.defined()) {  // the bias pre-fills y; the kernel adds the product
      const Tensor b = kernel_input(bias);
      for (int64_t r = 0; r < R; ++r) std::copy_n(b.data<T>(), N, py + r * N);
    }
    quantized_matmul<T>(X.data<T>(), R, weight.cols, weight, py, N, bias.defined());
  });
  if (should_record({x, bias})) record_quantized_linear(x, weight, bias, y, R);
  return y;
}

}  // namespace dg
