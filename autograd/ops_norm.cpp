// rms_norm and layer_norm over the last axis, each after its plain twin (plain_rms_norm,
// plain_layer_norm: the formula from primitive ops), a fused forward (saving per-row rstd, and mean
// for LayerNorm) beside its hand-written backward (kernels in tensor/kernels_norm.h), and their
// gradient-check rows. Under create_graph (autograd/tape.h) the fused norms run a recorded backward
// that recomputes the normalisation with ops (norm_backward_recorded); the kernels' backward stays
// the first-order one. Does not do: norms over other axes, running statistics, group norm.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the kernels and op errors
// in tests/test_kernels_norm.cpp, the plain twins against the fused ops in
// tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include "autograd/op_trace.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_norm.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// The checks rms_norm and layer_norm share: float x [.., D] and weight [D] of one dtype. Returns D.
int64_t check_norm_args(const Tensor& x, const Tensor& weight, const char* op) {
  check_float(x, op);
  check_float(weight, op);
  check_same_dtype(x, weight, op);
  check_arg(x.dim() >= 1, op, x, "x of shape [.., D]");
  const int64_t D = x.size(-1);
  check_arg(weight.shape() == Shape{D}, op, weight,
            fmt::format("weight of shape [{}] for x {}", D, x.describe()));
  return D;
}

// The backward of rms_norm (center false) or layer_norm as recorded ops, for create_graph: the
// normalisation is recomputed with ops (the fused forward's mean and rstd are constants), with
// x̂ = (x − mean)·r (x·r for rms_norm), r = (var + eps)^(−1/2), gw = g·w:
//   dw = Σ_rows g·x̂,  db = Σ_rows g,  dx = r·(gw − mean(gw) − x̂·mean(gw·x̂))  (no mean(gw) for
// rms_norm). The same values as the kernels' backward; every step has its own backward.
void norm_backward_recorded(const Tensor& g, const Tensor& x, const Tensor& weight,
                            const Tensor& bias, double eps, bool center) {
  const Tensor xc = center ? add(x, scale(mean(x, {-1}, /*keepdim=*/true), -1.0)) : x;
  const Tensor variance = mean(mul(xc, xc), {-1}, /*keepdim=*/true);  // [.., 1]
  const Tensor r = pow(add(variance, Tensor::full({}, eps, x.dtype())), -0.5);
  const Tensor xhat = mul(xc, r);
  if (weight.requires_grad()) accumulate_grad(weight, mul(g, xhat));
  if (bias.defined() && bias.requires_grad()) accumulate_grad(bias, g);
  if (!x.requires_grad()) return;
  const Tensor gw = mul(g, weight);
  Tensor inner = add(gw, scale(mul(xhat, mean(mul(gw, xhat), {-1}, true)), -1.0));
  if (center) inner = add(inner, scale(mean(gw, {-1}, true), -1.0));
  accumulate_grad(x, mul(inner, r));
}
}  // namespace

// ---- plain_rms_norm: the formula from primitive ops (read this first) ---------------------------
// x [.., D] -> x / sqrt(mean(x², last axis) + eps) · w. Every step is recorded, so the tape keeps
// x², its mean and the root as well: what the fused rms_norm below avoids.
Tensor plain_rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_norm_args(x, weight, "plain_rms_norm");
  const Tensor mean_square = mean(mul(x, x), {-1}, /*keepdim=*/true);  // [.., 1]
  const Tensor out = mul(div(x, sqrt(add_scalar(mean_square, eps))), weight);
  if (tracing()) trace_op("rms_norm", {x, weight}, {out}, {{"eps", eps}});  // one op
  return out;
}

// ---- rms_norm: x·rstd·w; saves rstd [rows] ------------------------------------------------------
Tensor rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = "rms_norm";
  const int64_t D = check_norm_args(x_in, weight, op), rows = rows_of(x_in);
  Tensor x = kernel_input(x_in), w = kernel_input(weight);
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor rstd = Tensor::empty({rows}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), rows, D, eps);
  });
  if (should_record({x_in, weight}))
    record(op, {x_in, weight}, out,
           [x_in, weight, x, w, rstd, rows, D](const Tensor& g) {
             Tensor gc = g.contiguous();
             dispatch_float(x.dtype(), "rms_norm", [&]<class T>() {
               T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "rms_norm") : nullptr;
               T* dw = weight.requires_grad() ? grad_ptr<T>(weight, "rms_norm") : nullptr;
               rmsnorm_backward<T>(dx, dw, gc.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(),
                                   rows, D);
             });
           })
        .saves({x_in, weight})
        .differentiable([x_in, weight, eps](const Tensor& g, const Tensor&) {
          norm_backward_recorded(g, x_in, weight, Tensor(), eps, false);
        });
  if (tracing()) trace_op(op, {x_in, weight}, {out}, {{"eps", eps}});
  return out;
}

// ---- plain_layer_norm: the formula from primitive ops (read this first) ------------------------
// x [.., D] -> (x − mean) / sqrt(var + eps) · w + b, with the mean and the biased variance over the
// last axis. Every step is recorded, so the tape keeps x − mean, its square, the variance and the
// root as well: what the fused layer_norm below avoids (it saves mean and rstd [rows] only).
Tensor plain_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "plain_layer_norm";
  const int64_t D = check_norm_args(x, weight, op);
  if (bias.defined()) {
    check_same_dtype(x, bias, op);
    check_arg(bias.shape() == Shape{D}, op, bias,
              fmt::format("bias of shape [{}] for x {}", D, x.describe()));
  }
  const Tensor centered = sub(x, mean(x, {-1}, /*keepdim=*/true));                // [.., D]
  const Tensor variance = mean(mul(centered, centered), {-1}, /*keepdim=*/true);  // [.., 1]
  const Tensor y = mul(div(centered, sqrt(add_scalar(variance, eps))), weight);
  const Tensor out = bias.defined() ? add(y, bias) : y;
  if (tracing()) trace_op("layer_norm", {x, weight, bias}, {out}, {{"eps", eps}});  // one op
  return out;
}

// ---- layer_norm: (x − mean)·rstd·w + b; saves mean, rstd [rows] ---------------------------------
Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = "layer_norm";
  const int64_t D = check_norm_args(x_in, weight, op), rows = rows_of(x_in);
  const bool has_bias = bias.defined();
  if (has_bias) {
    check_same_dtype(x_in, bias, op);
    check_arg(bias.shape() == Shape{D}, op, bias,
              fmt::format("bias of shape [{}] for x {}", D, x_in.describe()));
  }
  Tensor x = kernel_input(x_in), w = kernel_input(weight),
         b = has_bias ? kernel_input(bias) : Tensor();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor mean = Tensor::empty({rows}, x_in.dtype()), rstd = Tensor::empty({rows}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    layernorm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(),
                         has_bias ? b.data<T>() : nullptr, rows, D, eps);
  });
  std::vector<Tensor> inputs{x_in, weight};
  if (has_bias) inputs.push_back(bias);
  if (should_record(inputs))
    record(op, inputs, out,
           [x_in, weight, bias, x, w, mean, rstd, rows, D](const Tensor& g) {
             Tensor gc = g.contiguous();
             dispatch_float(x.dtype(), "layer_norm", [&]<class T>() {
               T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "layer_norm") : nullptr;
               T* dw = weight.requires_grad() ? grad_ptr<T>(weight, "layer_norm") : nullptr;
               T* db = bias.defined() && bias.requires_grad() ? grad_ptr<T>(bias, "layer_norm")
                                                              : nullptr;
               layernorm_backward<T>(dx, dw, db, gc.data<T>(), x.data<T>(), w.data<T>(),
                                     mean.data<T>(), rstd.data<T>(), rows, D);
             });
           })
        .saves({x_in, weight})  // the bias is not read
        .differentiable([x_in, weight, bias, eps](const Tensor& g, const Tensor&) {
          norm_backward_recorded(g, x_in, weight, bias, eps, true);
        });
  if (tracing()) trace_op(op, {x_in, weight, bias}, {out}, {{"eps", eps}});
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the norm family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> norm_op_cases() {
  using V = const std::vector<Tensor>&;
  auto norm_inputs = [](Shape xs, bool bias) {
    return [=] {
      const int64_t D = xs.back();
      std::vector<Tensor> in{random_tensor(xs, 21, -2, 2).set_name("x"),
                             random_tensor({D}, 22, 0.5, 1.5).set_name("weight")};
      if (bias) in.push_back(random_tensor({D}, 23).set_name("bias"));
      return in;
    };
  };
  return {
      {"rms_norm/x,weight", norm_inputs({2, 3, 6}, false),
       [](V in) { return rms_norm(in[0], in[1], 1e-6); }},
      {"rms_norm/large eps", norm_inputs({4, 5}, false),
       [](V in) { return rms_norm(in[0], in[1], 0.5); }},
      {"layer_norm/x,weight,bias", norm_inputs({4, 6}, true),
       [](V in) { return layer_norm(in[0], in[1], in[2], 1e-5); }},
      {"layer_norm/no bias", norm_inputs({2, 2, 5}, false),
       [](V in) { return layer_norm(in[0], in[1], Tensor(), 1e-5); }},
  };
}

}  // namespace dg
