// Elementwise ops and reductions, then the fused elementwise ops swiglu and depth_mix, each
// forward beside its backward, then the gradient-check rows.
// Binary ops broadcast (numpy rules); their backwards reduce the gradient back to each input's
// shape (accumulate_grad). Unary ops save what their derivative needs (input or output).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/profile.h"

namespace dg {

namespace {

// out = f(a, b) broadcast, as a fresh contiguous tensor.
template <class F>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), op), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    binary_kernel<T>(a, b, out, [&](T x, T y) { return f(x, y); });
  });
  return out;
}

template <class F>
Tensor unary(const Tensor& a, const char* op, F f) {
  Tensor in = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op,
                 [&]<class T>() { unary_kernel<T>(in, out, [&](T x) { return f(x); }); });
  return out;
}
}  // namespace

// ---- add / sub: d(a±b) = g, ±g ------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "add", [](auto x, auto y) { return x + y; });
  if (should_record({a, b}))
    record("add", {a, b}, out, [a, b](const Tensor& g) {
      if (a.requires_grad()) accumulate_grad(a, g);
      if (b.requires_grad()) accumulate_grad(b, g);
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (should_record({a, b}))
    record("sub", {a, b}, out, [a, b](const Tensor& g) {
      if (a.requires_grad()) accumulate_grad(a, g);
      if (b.requires_grad()) accumulate_grad(b, neg(g));
    });
  return out;
}

// ---- mul: d(ab) = g·b, g·a
Tensor mul(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (should_record({a, b}))
    record("mul", {a, b}, out, [a, b](const Tensor& g) {
      NoGradGuard no_grad;
      if (a.requires_grad()) accumulate_grad(a, mul(g, b));
      if (b.requires_grad()) accumulate_grad(b, mul(g, a));
    });
  return out;
}

// ---- div: d(a/b) = g/b, -g·a/b²
Tensor div(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "div", [](auto x, auto y) { return x / y; });
  if (should_record({a, b}))
    record("div", {a, b}, out, [a, b, out = detach(out)](const Tensor& g) {
      NoGradGuard no_grad;
      if (a.requires_grad()) accumulate_grad(a, div(g, b));
      if (b.requires_grad()) accumulate_grad(b, neg(div(mul(g, out), b)));  // -g·(a/b)/b
    });
  return out;
}

// ---- neg, scale, add_scalar
Tensor neg(const Tensor& a) { return scale(a, -1.0); }

Tensor scale(const Tensor& a, double factor) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "scale", [factor](auto x) { return x * static_cast<decltype(x)>(factor); });
  if (should_record({a}))
    record("scale", {a}, out, [a, factor](const Tensor& g) {
      NoGradGuard no_grad;
      accumulate_grad(a, scale(g, factor));
    });
  return out;
}

Tensor add_scalar(const Tensor& a, double value) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out =
      unary(a, "add_scalar", [value](auto x) { return x + static_cast<decltype(x)>(value); });
  if (should_record({a}))
    record("add_scalar", {a}, out, [a](const Tensor& g) { accumulate_grad(a, g); });
  return out;
}

// ---- exp: d = g·exp(a) = g·out
Tensor exp(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "exp", [](auto x) { return std::exp(x); });
  if (should_record({a}))
    record("exp", {a}, out, [a, out = detach(out)](const Tensor& g) {
      NoGradGuard no_grad;
      accumulate_grad(a, mul(g, out));
    });
  return out;
}

// ---- log: d = g / a
Tensor log(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "log", [](auto x) { return std::log(x); });
  if (should_record({a}))
    record("log", {a}, out, [a](const Tensor& g) {
      NoGradGuard no_grad;
      accumulate_grad(a, div(g, a));
    });
  return out;
}

// ---- sqrt: d = g / (2·sqrt(a)) = g / (2·out)
Tensor sqrt(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "sqrt", [](auto x) { return std::sqrt(x); });
  if (should_record({a}))
    record("sqrt", {a}, out, [a, out = detach(out)](const Tensor& g) {
      NoGradGuard no_grad;
      accumulate_grad(a, div(g, scale(out, 2.0)));
    });
  return out;
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
    });
  return out;
}

// ---- gelu (exact): y = ½a(1 + erf(a/√2)); dy/da = ½(1 + erf(a/√2)) + a·φ(a)
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
    });
  return out;
}

// ---- sum / mean over axes: backward broadcasts g back over the reduced axes
namespace {
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                    const char* op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t k = 0; k < rank; ++k) out.push_back(k);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw std::invalid_argument(fmt::format("{}: an axis is repeated", op));
  return out;
}

Tensor reduce(const Tensor& a, const std::vector<int64_t>& axes_in, bool keepdim, bool average) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = average ? "mean" : "sum";
  std::vector<int64_t> axes = normalize_axes(axes_in, a.dim(), op);
  int64_t count = 1;
  for (int64_t k : axes) count *= a.shape()[k];
  Tensor out = sum_axes(a, axes, keepdim);
  if (average) {
    dispatch_float(out.dtype(), op, [&]<class T>() {
      T* o = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(count));
    });
  }
  if (should_record({a}))
    record(op, {a}, out, [a, axes, average, count](const Tensor& g) {
      NoGradGuard no_grad;
      Shape keep = a.shape();
      for (int64_t k : axes) keep[k] = 1;
      Tensor gk = g.contiguous().view_reshape(keep);
      if (average) gk = scale(gk, 1.0 / static_cast<double>(count));
      accumulate_grad(a, gk.view_expand(a.shape()));
    });
  return out;
}
}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(a, axes, keepdim, false);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  return reduce(a, axes, keepdim, true);
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
    });
  return out;
}

// ---- depth_mix: Σ_j alpha[.., j]·S_j; dS_j += alpha_j·g, dalpha_j += <g, S_j> -------------------
Tensor depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha) {
  ScopedOpTimer op_timer(OpFamily::routing);
  const char* op = "depth_mix";
  if (sources.empty())
    throw std::invalid_argument("depth_mix: expected at least one source, got none");
  const int64_t J = static_cast<int64_t>(sources.size());
  const Tensor& s0 = sources[0];
  check_float(s0, op);
  check_arg(s0.dim() >= 1, op, s0, "sources of shape [.., D]");
  for (int64_t j = 1; j < J; ++j) {
    check_same_dtype(s0, sources[j], op);
    check_arg(sources[j].shape() == s0.shape(), op, sources[j],
              fmt::format("source {} with the shape of source 0 {}", j, shape_str(s0.shape())));
  }
  check_float(alpha, op);
  check_same_dtype(s0, alpha, op);
  Shape alpha_shape = s0.shape();
  alpha_shape.back() = J;
  check_arg(alpha.shape() == alpha_shape, op, alpha,
            fmt::format("alpha of shape {} for {} sources {}", shape_str(alpha_shape), J,
                        shape_str(s0.shape())));
  const int64_t D = s0.size(-1), rows = rows_of(s0);
  std::vector<Tensor> S;
  for (const Tensor& s : sources) S.push_back(kernel_input(s));
  Tensor a = kernel_input(alpha);
  Tensor out = Tensor::empty(s0.shape(), s0.dtype());
  dispatch_float(s0.dtype(), op, [&]<class T>() {
    std::vector<const T*> ptrs;
    for (const Tensor& s : S) ptrs.push_back(s.data<T>());
    depth_mix_forward<T>(out.data<T>(), ptrs.data(), a.data<T>(), rows, J, D);
  });
  std::vector<Tensor> inputs = sources;
  inputs.push_back(alpha);
  if (should_record(inputs))
    record(op, inputs, out, [sources, alpha, S, a, rows, J, D](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(alpha.dtype(), "depth_mix", [&]<class T>() {
        std::vector<const T*> ptrs;
        std::vector<T*> grads;
        for (int64_t j = 0; j < J; ++j) {
          ptrs.push_back(S[j].data<T>());
          grads.push_back(sources[j].requires_grad() ? grad_ptr<T>(sources[j], "depth_mix")
                                                     : nullptr);
        }
        T* dalpha = alpha.requires_grad() ? grad_ptr<T>(alpha, "depth_mix") : nullptr;
        depth_mix_backward<T>(grads.data(), dalpha, gc.data<T>(), ptrs.data(), a.data<T>(), rows, J,
                              D);
      });
    });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h)
#include "autograd/gradcheck.h"

namespace dg {

std::vector<OpCase> elementwise_op_cases() {
  using V = const std::vector<Tensor>&;
  auto mix_inputs = [](int64_t J) {
    return [J] {
      std::vector<Tensor> in;
      for (int64_t j = 0; j < J; ++j)
        in.push_back(random_tensor({2, 3, 4}, 40 + j).set_name(fmt::format("S{}", j)));
      in.push_back(random_tensor({2, 3, J}, 50 + J, 0.1, 1.0).set_name("alpha"));
      return in;
    };
  };
  auto mix_fn = [](V in) {
    return depth_mix(std::vector<Tensor>(in.begin(), in.end() - 1), in.back());
  };
  auto two = [](Shape sa, Shape sb, double lo = -1, double hi = 1) {
    return [=] {
      return std::vector<Tensor>{random_tensor(sa, 1, lo, hi).set_name("a"),
                                 random_tensor(sb, 2, lo, hi).set_name("b")};
    };
  };
  auto one = [](Shape s, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, 3, lo, hi).set_name("a")}; };
  };
  return {
      {"add", two({3, 4}, {3, 4}), [](V in) { return add(in[0], in[1]); }},
      {"add/broadcast", two({2, 3, 4}, {3, 1}), [](V in) { return add(in[0], in[1]); }},
      {"sub/broadcast", two({4}, {2, 3, 4}), [](V in) { return sub(in[0], in[1]); }},
      {"mul/broadcast", two({2, 1, 4}, {3, 1}), [](V in) { return mul(in[0], in[1]); }},
      {"div/broadcast", two({2, 3}, {3}, 0.5, 2.0), [](V in) { return div(in[0], in[1]); }},
      {"neg", one({5, 3}), [](V in) { return neg(in[0]); }},
      {"scale", one({5, 3}), [](V in) { return scale(in[0], -2.5); }},
      {"add_scalar", one({5, 3}), [](V in) { return add_scalar(in[0], 0.75); }},
      {"exp", one({4, 5}), [](V in) { return exp(in[0]); }},
      {"log", one({4, 5}, 0.2, 3.0), [](V in) { return log(in[0]); }},
      {"sqrt", one({4, 5}, 0.2, 3.0), [](V in) { return sqrt(in[0]); }},
      {"silu", one({4, 6}, -3, 3), [](V in) { return silu(in[0]); }},
      {"gelu", one({4, 6}, -3, 3), [](V in) { return gelu(in[0]); }},
      {"gelu_tanh", one({4, 6}, -3, 3), [](V in) { return gelu_tanh(in[0]); }},
      {"sum/all", one({3, 4}), [](V in) { return sum(in[0]); }},
      {"sum/axis1", one({2, 3, 4}), [](V in) { return sum(in[0], {1}); }},
      {"sum/axes0,2,keepdim", one({2, 3, 4}),
       [](V in) {
         return sum(in[0], {0, -1}, true);
       }},
      {"mean/all", one({3, 4}), [](V in) { return mean(in[0]); }},
      {"mean/last", one({2, 3, 4}), [](V in) { return mean(in[0], {-1}); }},
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
      {"depth_mix/J=1", mix_inputs(1), mix_fn},
      {"depth_mix/J=2", mix_inputs(2), mix_fn},
      {"depth_mix/J=3", mix_inputs(3), mix_fn},
  };
}

}  // namespace dg
