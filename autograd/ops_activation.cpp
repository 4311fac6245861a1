// Activations, each forward beside its backward: relu, leaky_relu, sigmoid, tanh, softplus, silu,
// gelu, gelu_tanh, and the fused swiglu (after its plain twin); gradient-check rows last.
// Derivatives at kinks follow torch. Does not do: in-place activations, hardtanh/elu/mish.
// create_graph (autograd/tape.h): every op supports it. Each keeps its kernel backward for
// training and adds a differentiable one from recorded ops, with the same values and kink rules
// (unary_pointwise switches on the op; sigmoid and tanh use the output with its graph; gelu's
// Φ is the recorded op normal_cdf, whose derivative φ is composed).
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them; their second derivatives
// tests/test_gradgradcheck_pointwise.cpp), the kernels in
// tests/test_kernels_pointwise.cpp (relu..softplus) and tests/test_kernels_elementwise.cpp
// (swiglu), plain_swiglu in tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_pointwise.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// f'(a)·g from recorded ops, for create_graph: the kernel's values and rules at the kinks (relu'
// from the output, 0 at 0; abs' = sign; clamp passes g at its bounds; pow' = 0 when p = 0; softplus
// is linear where βa > threshold). Each bool mask is a comparison: a constant, as the kernel's
// branch. `out` is the op's output with its graph (sigmoid, tanh).
Tensor unary_pointwise_recorded(UnaryOp kind, UnaryArgs args, const Tensor& a, const Tensor& g,
                                const Tensor& out) {
  switch (kind) {
    case UnaryOp::relu:
      return masked_fill(g, le(out, 0.0), 0.0);
    case UnaryOp::leaky_relu:
      return where(gt(a, 0.0), g, scale(g, args.a));
    case UnaryOp::sigmoid:
      return mul(mul(g, 1.0 - out), out);
    case UnaryOp::tanh:
      return mul(g, 1.0 - mul(out, out));
    case UnaryOp::softplus: {  // σ(βa) = z / (z + 1), z = e^{βa}, on βa set to 0 where linear
      const Tensor ba = scale(a, args.a), linear = gt(ba, args.b);
      const Tensor z = exp(where(linear, Tensor::zeros({}, a.dtype()), ba));
      return where(linear, g, div(mul(g, z), add_scalar(z, 1.0)));  // the kernel's order
    }
    case UnaryOp::abs:
      return mul(g, sub(to_dtype(gt(a, 0.0), a.dtype()), to_dtype(lt(a, 0.0), a.dtype())));
    case UnaryOp::clamp:
      return masked_fill(g, logical_not(logical_and(ge(a, args.a), le(a, args.b))), 0.0);
    case UnaryOp::pow:
      if (args.a == 0) return scale(g, 0.0);
      return mul(g, scale(pow(a, args.a - 1), args.a));
  }
  throw std::logic_error("unary_pointwise: unknown op");
}
}  // namespace

// y = f(x) elementwise with the unary kernel; the backward reads x (relu, sigmoid and tanh: y).
Tensor unary_pointwise(const Tensor& a, UnaryOp kind, UnaryArgs args, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  Tensor x = kernel_input(a);
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  const int64_t n = y.numel();
  dispatch_float(a.dtype(), op,
                 [&]<class T>() { pointwise_forward<T>(kind, args, y.data<T>(), x.data<T>(), n); });
  if (tracing()) trace_op(op, {a}, {y}, {{"a", args.a}, {"b", args.b}});
  if (!should_record({a})) return y;
  RecordedNode node = record(op, {a}, y, [a, x, y = detach(y), kind, args, n, op](const Tensor& g) {
    Tensor gc = g.contiguous();
    Tensor ga = Tensor::empty(a.shape(), a.dtype());
    dispatch_float(a.dtype(), op, [&]<class T>() {
      pointwise_backward<T>(kind, args, ga.data<T>(), gc.data<T>(), x.data<T>(), y.data<T>(), n);
    });
    accumulate_grad(a, ga);
  });
  if (kind == UnaryOp::relu || kind == UnaryOp::sigmoid || kind == UnaryOp::tanh) node.saves({y});
  node.differentiable([a, kind, args](const Tensor& g, const Tensor& out) {
    accumulate_grad(a, unary_pointwise_recorded(kind, args, a, g, out));
  });
  return y;
}

// ---- activations: y = f(x); f' as torch, at the kinks too (see tensor/kernels_pointwise.h) ----
Tensor relu(const Tensor& a) { return unary_pointwise(a, UnaryOp::relu, {}, "relu"); }

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  return unary_pointwise(a, UnaryOp::leaky_relu, {negative_slope, 0}, "leaky_relu");
}

Tensor sigmoid(const Tensor& a) { return unary_pointwise(a, UnaryOp::sigmoid, {}, "sigmoid"); }

Tensor tanh(const Tensor& a) { return unary_pointwise(a, UnaryOp::tanh, {}, "tanh"); }

Tensor softplus(const Tensor& a, double beta, double threshold) {
  if (!(beta != 0))
    throw std::invalid_argument(fmt::format("softplus: beta must be nonzero, got {}", beta));
  return unary_pointwise(a, UnaryOp::softplus, {beta, threshold}, "softplus");
}

// ---- silu: y = a·σ(a); dy/da = σ(a)·(1 + a·(1 − σ(a)))
Tensor silu(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "silu", [](auto x) { return x / (decltype(x)(1) + std::exp(-x)); });
  if (should_record({a}))
    record("silu", {a}, out, [a](const Tensor& g) {
      Tensor in = kernel_input(a), gc = g.contiguous();
      Tensor ga = Tensor::empty(a.shape(), a.dtype());
      dispatch_float(a.dtype(), "silu", [&]<class T>() {
        binary_kernel<T>(in, gc, ga, [](T x, T gy) {
          T s = T(1) / (T(1) + std::exp(-x));
          return gy * s * (T(1) + x * (T(1) - s));
        });
      });
      accumulate_grad(a, ga);
    }).differentiable([a](const Tensor& g, const Tensor&) {
      const Tensor s = sigmoid(a);
      accumulate_grad(a, mul(g, mul(s, add_scalar(mul(a, 1.0 - s), 1.0))));
    });
  return out;
}

// ---- gelu (exact): y = ½a(1 + erf(a/√2)); dy/da = ½(1 + erf(a/√2)) + a·φ(a) = Φ(a) + a·φ(a)
namespace {
// φ(a) = e^{−a²/2}/√(2π) from recorded ops.
Tensor normal_pdf(const Tensor& a) {
  return scale(exp(scale(mul(a, a), -0.5)), 0.3989422804014327);  // 1/√(2π)
}
// Φ(a) = ½(1 + erf(a/√2)), recorded as "normal_cdf" with Φ' = φ: gelu's create_graph backward.
Tensor normal_cdf(const Tensor& a) {
  Tensor out = unary(a, "normal_cdf", [](auto x) {
    using T = decltype(x);
    return T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  });
  if (should_record({a}))
    record("normal_cdf", {a}, out, [a](const Tensor& g) {
      accumulate_grad(a, mul(g, normal_pdf(a)));
    }).composed();
  return out;
}
}  // namespace

Tensor gelu(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "gelu", [](auto x) {
    using T = decltype(x);
    return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
  });
  if (should_record({a}))
    record("gelu", {a}, out, [a](const Tensor& g) {
      Tensor in = kernel_input(a), gc = g.contiguous();
      Tensor ga = Tensor::empty(a.shape(), a.dtype());
      dispatch_float(a.dtype(), "gelu", [&]<class T>() {
        binary_kernel<T>(in, gc, ga, [](T x, T gy) {
          T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
          T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);  // 1/√(2π)
          return gy * (cdf + x * pdf);
        });
      });
      accumulate_grad(a, ga);
    }).differentiable([a](const Tensor& g, const Tensor&) {
      accumulate_grad(a, mul(g, add(normal_cdf(a), mul(a, normal_pdf(a)))));
    });
  return out;
}

// ---- gelu_tanh: y = ½a(1 + tanh(u)), u = β(a + κa³), β = √(2/π), κ = 0.044715;
// dy/da = ½(1 + tanh u) + ½a(1 − tanh²u)·β(1 + 3κa²). The steps and their order are torch's
// (GeluKernel.cpp, approximate='tanh'), so float32 values agree to the last bits of tanh.
namespace {
template <class T>
T gelu_tanh_value(T x) {
  const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
  const T cube = x * x * x;
  return T(0.5) * x * (T(1) + std::tanh(beta * (x + kappa * cube)));
}
template <class T>
T gelu_tanh_derivative(T x) {
  const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
  const T square = x * x, cube = square * x;
  const T tanh_inner = std::tanh(beta * (x + kappa * cube));
  const T left = T(0.5) * x, right = T(1) + tanh_inner;
  const T left_derivative = T(0.5) * right;
  const T right_derivative =
      left * (T(1) - tanh_inner * tanh_inner) * (beta * (T(1) + T(3) * kappa * square));
  return left_derivative + right_derivative;
}

// gelu_tanh_derivative from recorded ops (tanh's own backward makes it differentiable again).
Tensor gelu_tanh_derivative_recorded(const Tensor& a) {
  const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
  const Tensor square = mul(a, a);
  const Tensor tanh_inner = tanh(scale(add(a, scale(mul(square, a), kappa)), beta));
  const Tensor left_derivative = scale(add_scalar(tanh_inner, 1.0), 0.5);
  const Tensor right_derivative = mul(mul(scale(a, 0.5), 1.0 - mul(tanh_inner, tanh_inner)),
                                      scale(add_scalar(scale(square, 3 * kappa), 1.0), beta));
  return add(left_derivative, right_derivative);
}
}  // namespace

Tensor gelu_tanh(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "gelu_tanh", [](auto x) { return gelu_tanh_value(x); });
  if (should_record({a}))
    record("gelu_tanh", {a}, out, [a](const Tensor& g) {
      Tensor in = kernel_input(a), gc = g.contiguous();
      Tensor ga = Tensor::empty(a.shape(), a.dtype());
      dispatch_float(a.dtype(), "gelu_tanh", [&]<class T>() {
        binary_kernel<T>(in, gc, ga, [](T x, T gy) { return gy * gelu_tanh_derivative(x); });
      });
      accumulate_grad(a, ga);
    }).differentiable([a](const Tensor& g, const Tensor&) {
      accumulate_grad(a, mul(g, gelu_tanh_derivative_recorded(a)));
    });
  return out;
}

// ---- plain_swiglu: silu(gate)·up from two primitive ops (read this first) -----------------------
// The tape keeps silu(gate) as well: what the fused swiglu below avoids.
Tensor plain_swiglu(const Tensor& gate, const Tensor& up) {
  check_float(gate, "plain_swiglu");
  check_float(up, "plain_swiglu");
  if (gate.shape() != up.shape())
    throw std::invalid_argument(
        fmt::format("plain_swiglu: gate {} and up {} must have the same shape", gate.describe(),
                    up.describe()));
  return mul(silu(gate), up);
}

// ---- swiglu: silu(gate)·up in one pass; saves gate and up (not silu(gate))
Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "swiglu";
  check_float(gate_in, op);
  check_same_dtype(gate_in, up_in, op);
  if (gate_in.shape() != up_in.shape())
    throw std::invalid_argument(fmt::format("swiglu: gate {} and up {} must have the same shape",
                                            gate_in.describe(), up_in.describe()));
  Tensor gate = kernel_input(gate_in), up = kernel_input(up_in);
  Tensor out = Tensor::empty(gate.shape(), gate.dtype());
  const int64_t n = out.numel();
  dispatch_float(gate.dtype(), op, [&]<class T>() {
    swiglu_forward<T>(out.data<T>(), gate.data<T>(), up.data<T>(), n);
  });
  if (tracing()) trace_op(op, {gate_in, up_in}, {out});
  if (should_record({gate_in, up_in}))
    record(op, {gate_in, up_in}, out, [gate_in, up_in, gate, up, n](const Tensor& g) {
      Tensor gc = g.contiguous();
      std::optional<GradSink> dgate, dup;  // written when fresh, else added into
      if (gate_in.requires_grad()) dgate.emplace(gate_in, std::vector<Tensor>{up_in});
      if (up_in.requires_grad()) dup.emplace(up_in, std::vector<Tensor>{gate_in});
      dispatch_float(gate.dtype(), "swiglu", [&]<class T>() {
        swiglu_backward<T>(dgate ? dgate->data<T>() : nullptr, dgate && dgate->fresh,
                           dup ? dup->data<T>() : nullptr, dup && dup->fresh, gc.data<T>(),
                           gate.data<T>(), up.data<T>(), n);
      });
      if (dgate) dgate->finish();
      if (dup) dup->finish();
    }).differentiable([gate_in, up_in](const Tensor& g, const Tensor&) {
      // dgate = g·up·silu'(gate), dup = g·silu(gate), silu = gate·σ(gate)
      const Tensor s = sigmoid(gate_in);
      if (gate_in.requires_grad())
        accumulate_grad(gate_in,
                        mul(mul(g, up_in), mul(s, add_scalar(mul(gate_in, 1.0 - s), 1.0))));
      if (up_in.requires_grad()) accumulate_grad(up_in, mul(g, mul(gate_in, s)));
    });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h)
#include "autograd/gradcheck.h"

namespace dg {

// data table: the activation family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> activation_op_cases() {
  using V = const std::vector<Tensor>&;
  // Inputs uniform in [lo, hi) with every |x| >= gap: no element sits on a kink at 0.
  auto away = [](Shape s, uint64_t seed, double lo, double hi, double gap, const char* name) {
    return random_tensor_away_from_zero(s, seed, lo, hi, gap).set_name(name);
  };
  auto one = [=](Shape s, double lo = -2, double hi = 2) {
    return [=] { return std::vector<Tensor>{away(s, 61, lo, hi, 0.05, "a")}; };
  };
  auto smooth = [](Shape s, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, 3, lo, hi).set_name("a")}; };
  };
  return {
      {"relu", one({4, 5}), [](V in) { return relu(in[0]); }},
      {"leaky_relu", one({4, 5}), [](V in) { return leaky_relu(in[0]); }},
      {"leaky_relu/slope 0.2", one({3, 4}), [](V in) { return leaky_relu(in[0], 0.2); }},
      {"sigmoid", one({4, 5}, -4, 4), [](V in) { return sigmoid(in[0]); }},
      {"tanh", one({4, 5}), [](V in) { return tanh(in[0]); }},
      {"softplus", one({4, 5}, -4, 4), [](V in) { return softplus(in[0]); }},
      // beta 2, threshold 3: both branches (βx > 3 is linear) with x away from 1.5
      {"softplus/beta 2 threshold 3",
       [=] {
         return std::vector<Tensor>{away({4, 5}, 64, -3, 3, 0.05, "a")};
       },
       [](V in) { return softplus(in[0], 2.0, 3.0); }},
      {"silu", smooth({4, 6}, -3, 3), [](V in) { return silu(in[0]); }},
      {"gelu", smooth({4, 6}, -3, 3), [](V in) { return gelu(in[0]); }},
      {"gelu_tanh", smooth({4, 6}, -3, 3), [](V in) { return gelu_tanh(in[0]); }},
      {"swiglu",
       [] {
         return std::vector<Tensor>{random_tensor({3, 7}, 24, -3, 3).set_name("gate"),
                                    random_tensor({3, 7}, 25, -2, 2).set_name("up")};
       },
       [](V in) { return swiglu(in[0], in[1]); }},
      {"swiglu/gate is up",
       [] {
         return std::vector<Tensor>{random_tensor({2, 5}, 26, -3, 3).set_name("x")};
       },
       [](V in) { return swiglu(in[0], in[0]); }},
  };
}

}  // namespace dg
