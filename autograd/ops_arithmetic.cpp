// Arithmetic of two tensors (and a tensor and a scalar), elementwise: add, sub, mul, div
// (broadcasting), neg, scale, add_scalar, pow of two tensors, minimum, maximum, where,
// masked_fill and the C++ operators; then depth_mix (a weighted sum of sources, after its plain
// twin). Each forward beside its backward, gradient-check rows last. Functions of one tensor (exp,
// log, sqrt, sin, abs, clamp, pow by a scalar, ...) are in ops_unary.cpp, the comparisons and
// logical ops (never recorded) in ops_compare.cpp, activations in ops_activation.cpp, sum/mean in
// ops_reduce.cpp. Binary ops broadcast (numpy rules); their backwards reduce the gradient back to
// each input's shape (accumulate_grad). Derivatives at kinks and ties follow torch; where and
// masked_fill take bool masks. create_graph (autograd/tape.h): every op here supports it. add,
// sub, mul, scale and add_scalar have composed backwards; the others keep their kernel backward
// for training and add a differentiable one from recorded ops with the same values and kink rules
// (div uses the output with its graph; the comparisons' bool masks are constants); depth_mix's
// picks alpha's columns with one-hot constants. Checks: the rows at the end
// (tests/test_gradcheck_ops.cpp runs them; their second derivatives
// tests/test_gradgradcheck_pointwise.cpp), the kernels in tests/test_kernels_elementwise.cpp and
// tests/test_kernels_pointwise.cpp, plain_depth_mix in tests/test_plain_ops.cpp. mul_backward and
// div_backward are exercises of the learner's path's chapter 3 (autograd/learn-03-an-op.md): weak
// definitions (tensor/exercise.h) a learner's may replace.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_pointwise.h"
#include "tensor/profile.h"

namespace dg {

Tensor expanded(const Tensor& t, const Shape& shape) {
  return t.shape() == shape ? kernel_input(t) : raw::view_expand(t, shape).contiguous();
}

namespace {

// out = f(a, b) broadcast, as a fresh contiguous tensor.
template <class F>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_same_dtype(a, b, op);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), op), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    binary_kernel<T>(a, b, out, [&](T x, T y) { return f(x, y); });
  });
  if (tracing()) trace_op(op, {a, b}, {out});
  return out;
}

// A bool mask as a contiguous bool tensor of `shape` (refused unless bool, as torch 2's; see
// require_bool_mask in autograd/ops.h).
Tensor mask_as(const Tensor& mask, const Shape& shape, const char* op, const char* arg) {
  require_bool_mask(mask, op, arg);
  return expanded(mask, shape);
}

// A 0-d constant of t's dtype (broadcasts against anything).
Tensor scalar_like(double value, const Tensor& t) { return Tensor::full({}, value, t.dtype()); }

// The create_graph backward of binary_pointwise, from recorded ops, with the kernel's rules: pow's
// da is 0 where b = 0 and db is 0 where a = 0 and b >= 0 (torch's pow_backward_self/_exponent; log
// reads 1 there, so no NaN reaches a second derivative); minimum/maximum give g/2 to each side on
// a tie. The 0/1 masks come from comparisons: constants, as the kernel's branches.
void binary_pointwise_recorded(BinaryOp kind, const Tensor& a, const Tensor& b, const Tensor& g,
                               const Tensor& y) {
  const Tensor zero = scalar_like(0.0, a), one = scalar_like(1.0, a);
  if (kind == BinaryOp::pow) {
    if (a.requires_grad())
      accumulate_grad(a, where(eq(b, 0.0), zero, mul(g, mul(b, pow(a, add_scalar(b, -1.0))))));
    if (b.requires_grad()) {
      const Tensor at_zero = logical_and(eq(a, 0.0), ge(b, 0.0));
      accumulate_grad(b, where(at_zero, zero, mul(g, mul(y, log(where(at_zero, one, a))))));
    }
    return;
  }
  // the share of g each side gets: 1 where it is chosen, 1/2 on a tie, else 0
  auto as_float = [&](const Tensor& mask) { return to_dtype(mask, a.dtype()); };  // 1/0
  const Tensor tie = scale(as_float(eq(a, b)), 0.5);
  const Tensor a_loses = as_float(kind == BinaryOp::maximum ? lt(a, b) : gt(a, b));
  const Tensor b_loses = as_float(kind == BinaryOp::maximum ? gt(a, b) : lt(a, b));
  if (a.requires_grad()) accumulate_grad(a, mul(g, sub(sub(one, a_loses), tie)));
  if (b.requires_grad()) accumulate_grad(b, mul(g, sub(sub(one, b_loses), tie)));
}

// y = f(a, b) broadcast; the backward expands a and b to y's shape, and accumulate_grad sums the
// gradients back over the broadcast axes.
Tensor binary_pointwise(const Tensor& a, const Tensor& b, BinaryOp kind, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  check_float(b, op);
  check_same_dtype(a, b, op);
  Tensor y = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), op), a.dtype());
  binary_pointwise_forward(kind, a, b, y);
  if (tracing()) trace_op(op, {a, b}, {y});
  if (!should_record({a, b})) return y;
  RecordedNode node = record(op, {a, b}, y, [a, b, y = detach(y), kind, op](const Tensor& g) {
    const Shape& shape = y.shape();
    Tensor ae = expanded(a, shape), be = expanded(b, shape), gc = g.contiguous();
    Tensor ga, gb;
    if (a.requires_grad()) ga = Tensor::empty(shape, a.dtype());
    if (b.requires_grad()) gb = Tensor::empty(shape, b.dtype());
    dispatch_float(a.dtype(), op, [&]<class T>() {
      binary_pointwise_backward<T>(kind, ga.defined() ? ga.data<T>() : nullptr,
                                   gb.defined() ? gb.data<T>() : nullptr, gc.data<T>(),
                                   ae.data<T>(), be.data<T>(), y.data<T>(), y.numel());
    });
    if (ga.defined()) accumulate_grad(a, ga);
    if (gb.defined()) accumulate_grad(b, gb);
  });
  if (kind == BinaryOp::pow)
    node.saves({a, b, y});  // db reads y
  else
    node.saves({a, b});
  node.differentiable([a, b, kind](const Tensor& g, const Tensor& out) {
    binary_pointwise_recorded(kind, a, b, g, out);
  });
  return y;
}

}  // namespace

// ---- add / sub: d(a±b) = g, ±g ------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "add", [](auto x, auto y) { return x + y; });
  if (should_record({a, b}))
    record("add", {a, b}, out,
           [a, b](const Tensor& g) {
             if (a.requires_grad()) accumulate_grad(a, g);
             if (b.requires_grad()) accumulate_grad(b, g);
           })
        .saves({})
        .composed();
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (should_record({a, b}))
    record("sub", {a, b}, out,
           [a, b](const Tensor& g) {
             if (a.requires_grad()) accumulate_grad(a, g);
             if (b.requires_grad()) accumulate_grad(b, neg(g));
           })
        .saves({})
        .composed();
  return out;
}

// ---- mul: d(ab) = g·b, g·a
Tensor mul(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (should_record({a, b}))
    record("mul", {a, b}, out, [a, b](const Tensor& g) { mul_backward(g, a, b); }).composed();
  return out;
}

// g [out's shape], a and b broadcast to it. mul(g, b) has the output's shape even when b is
// smaller; accumulate_grad sums it back to a's shape.
DG_EXERCISE void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, mul(g, b));
  if (b.requires_grad()) accumulate_grad(b, mul(g, a));
}

// ---- div: d(a/b) = g/b, -g·a/b²
Tensor div(const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = broadcast_binary(a, b, "div", [](auto x, auto y) { return x / y; });
  if (should_record({a, b}))
    record("div", {a, b}, out,
           [a, b, out = detach(out)](const Tensor& g) { div_backward(g, a, b, out); })
        .saves({b, out})
        .differentiable(  // out with its graph
            [a, b](const Tensor& g, const Tensor& out) { div_backward(g, a, b, out); });
  return out;
}

// g, out [out's shape], a and b broadcast to it. db = -g·a/b² is computed as -(g·out)/b: out is
// a/b already, so no second division by b² (which would overflow sooner).
DG_EXERCISE void div_backward(const Tensor& g, const Tensor& a, const Tensor& b,
                              const Tensor& out) {
  if (a.requires_grad()) accumulate_grad(a, div(g, b));
  if (b.requires_grad()) accumulate_grad(b, neg(div(mul(g, out), b)));
}

// ---- neg, scale, add_scalar
Tensor neg(const Tensor& a) { return scale(a, -1.0); }

Tensor scale(const Tensor& a, double factor) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "scale", [factor](auto x) { return x * static_cast<decltype(x)>(factor); });
  if (tracing()) trace_op("scale", {a}, {out}, {{"factor", factor}});
  if (should_record({a}))
    record("scale", {a}, out,
           [a, factor](const Tensor& g) { accumulate_grad(a, scale(g, factor)); })
        .saves({})
        .composed();
  return out;
}

Tensor add_scalar(const Tensor& a, double value) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out =
      unary(a, "add_scalar", [value](auto x) { return x + static_cast<decltype(x)>(value); });
  if (tracing()) trace_op("add_scalar", {a}, {out}, {{"value", value}});
  if (should_record({a}))
    record("add_scalar", {a}, out, [a](const Tensor& g) { accumulate_grad(a, g); })
        .saves({})
        .composed();
  return out;
}

// ---- pow, minimum, maximum of two tensors (broadcasting) --------------------------------------
// d(a^b) = g·b·a^(b−1), g·a^b·ln a; minimum/maximum pass g to the chosen side, g/2 each on ties.
Tensor pow(const Tensor& a, const Tensor& exponent) {
  return binary_pointwise(a, exponent, BinaryOp::pow, "pow_tensor");
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_pointwise(a, b, BinaryOp::minimum, "minimum");
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_pointwise(a, b, BinaryOp::maximum, "maximum");
}

// ---- where(cond, a, b): all three broadcast; d = g where cond for a, where not cond for b ------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "where";
  check_float(a, op);
  check_float(b, op);
  check_same_dtype(a, b, op);
  require_bool_mask(cond, op, "condition");
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), op), b.shape(), op);
  Tensor c = mask_as(cond, shape, op, "condition");
  Tensor ae = expanded(a, shape), be = expanded(b, shape);
  Tensor y = Tensor::empty(shape, a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    where_forward<T>(y.data<T>(), c.data<bool>(), ae.data<T>(), be.data<T>(), y.numel());
  });
  if (tracing()) trace_op(op, {cond, a, b}, {y});
  if (should_record({a, b}))
    record(op, {a, b}, y,
           [a, b, c](const Tensor& g) {
             Tensor gc = g.contiguous(), ga, gb;
             if (a.requires_grad()) ga = Tensor::empty(c.shape(), a.dtype());
             if (b.requires_grad()) gb = Tensor::empty(c.shape(), b.dtype());
             dispatch_float(a.dtype(), "where", [&]<class T>() {
               where_backward<T>(ga.defined() ? ga.data<T>() : nullptr,
                                 gb.defined() ? gb.data<T>() : nullptr, gc.data<T>(),
                                 c.data<bool>(), c.numel());
             });
             if (ga.defined()) accumulate_grad(a, ga);
             if (gb.defined()) accumulate_grad(b, gb);
           })
        .saves({c})  // the condition only (a copy, or cond's storage)
        .differentiable([a, b, c](const Tensor& g, const Tensor&) {
          // g where c, 0 elsewhere; and the mirror
          if (a.requires_grad()) accumulate_grad(a, masked_fill(g, logical_not(c), 0.0));
          if (b.requires_grad()) accumulate_grad(b, masked_fill(g, c, 0.0));
        });
  return y;
}
// A Python scalar on one side is a 0-d tensor of the other side's dtype (torch 1.13's result).
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  return where(cond, a, Tensor::full({}, b, a.dtype()));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  return where(cond, Tensor::full({}, a, b.dtype()), b);
}

// ---- masked_fill(a, mask, value): value where mask, else a; mask broadcasts to a's shape -------
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "masked_fill";
  check_float(a, op);
  require_bool_mask(mask, op, "mask");
  if (broadcast_shapes(a.shape(), mask.shape(), op) != a.shape())
    throw std::invalid_argument(fmt::format("masked_fill: mask {} does not broadcast to {}",
                                            mask.describe(), a.describe()));
  Tensor c = mask_as(mask, a.shape(), op, "mask");
  Tensor x = kernel_input(a), fill = Tensor::full(a.shape(), value, a.dtype());
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    where_forward<T>(y.data<T>(), c.data<bool>(), fill.data<T>(), x.data<T>(), y.numel());
  });
  if (tracing()) trace_op(op, {a, mask}, {y}, {{"value", value}});
  if (should_record({a}))
    record(op, {a}, y,
           [a, c](const Tensor& g) {
             Tensor gc = g.contiguous(), ga = Tensor::empty(a.shape(), a.dtype());
             dispatch_float(a.dtype(), "masked_fill", [&]<class T>() {
               where_backward<T>(nullptr, ga.data<T>(), gc.data<T>(), c.data<bool>(), c.numel());
             });
             accumulate_grad(a, ga);
           })
        .saves({c})
        .differentiable([a, c](const Tensor& g, const Tensor&) {
          accumulate_grad(a, masked_fill(g, c, 0.0));  // itself: 0 where the mask is set
        });
  return y;
}

void require_bool_mask(const Tensor& mask, const char* op, const char* arg) {
  if (!mask.defined())
    throw std::invalid_argument(
        fmt::format("{}: {} is undefined; expected a bool tensor", op, arg));
  if (mask.dtype() == DType::b8) return;
  throw std::invalid_argument(
      fmt::format("{}: {} must be bool, got {} ({}); write dg::ne({}, 0) or {}.to(DType::b8)", op,
                  arg, dtype_name(mask.dtype()), mask.describe(), arg, arg));
}

// ---- C++ operators: each is one named op, recorded as that op --------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s) { return add_scalar(a, s); }
Tensor operator+(double s, const Tensor& a) { return add_scalar(a, s); }
Tensor operator-(const Tensor& a, double s) { return add_scalar(a, -s); }  // x + (−s) = x − s
Tensor operator-(double s, const Tensor& a) { return sub(scalar_like(s, a), a); }
Tensor operator*(const Tensor& a, double s) { return scale(a, s); }
Tensor operator*(double s, const Tensor& a) { return scale(a, s); }
Tensor operator/(const Tensor& a, double s) { return div(a, scalar_like(s, a)); }
// s / a as torch computes it (a.reciprocal() * s), so the float32 values are torch's bits.
Tensor operator/(double s, const Tensor& a) { return scale(pow(a, -1.0), s); }

// ---- plain_depth_mix: Σ_j alpha[.., j]·S_j from primitive ops (read this first) ----------------
// Each term multiplies S_j by alpha's column j ([.., 1], broadcast over D) and adds it on, j in
// order: the tape keeps every product [.., D] and partial sum, which the fused depth_mix never
// makes.
Tensor plain_depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha) {
  const char* op = "plain_depth_mix";
  if (sources.empty())
    throw std::invalid_argument("plain_depth_mix: expected at least one source, got none");
  const int64_t J = static_cast<int64_t>(sources.size());
  check_float(sources[0], op);
  check_arg(sources[0].dim() >= 1, op, sources[0], "sources of shape [.., D]");
  for (int64_t j = 1; j < J; ++j)
    check_arg(
        sources[j].shape() == sources[0].shape(), op, sources[j],
        fmt::format("source {} with the shape of source 0 {}", j, shape_str(sources[0].shape())));
  Shape alpha_shape = sources[0].shape();
  alpha_shape.back() = J;
  check_arg(alpha.defined() && alpha.shape() == alpha_shape, op, alpha,
            fmt::format("alpha of shape {} for {} sources {}", shape_str(alpha_shape), J,
                        shape_str(sources[0].shape())));
  const int64_t last = alpha.dim() - 1;
  Tensor out;
  for (int64_t j = 0; j < J; ++j) {
    const Tensor term = mul(slice(alpha, last, j, j + 1), sources[j]);  // [.., 1] · [.., D]
    out = j == 0 ? term : add(out, term);
  }
  return out;
}

// ---- depth_mix: Σ_j alpha[.., j]·S_j; dS_j += alpha_j·g, dalpha_j += <g, S_j> -------------------
namespace {
// depth_mix's create_graph backward from recorded ops. Column j of alpha is picked, and dalpha's
// column j placed, by a one-hot e_j [J] (mul and sum only): dS_j = g·Σ(alpha⊙e_j) and
// dalpha = Σ_j Σ_D(g⊙S_j)·e_j.
void depth_mix_recorded(const std::vector<Tensor>& sources, const Tensor& alpha, const Tensor& g) {
  const int64_t J = static_cast<int64_t>(sources.size()), last = alpha.dim() - 1;
  Tensor dalpha;
  for (int64_t j = 0; j < J; ++j) {
    std::vector<double> onehot(static_cast<size_t>(J), 0.0);
    onehot[static_cast<size_t>(j)] = 1.0;
    const Tensor e = Tensor::from_vector(onehot, {J}, alpha.dtype());
    if (sources[j].requires_grad())
      accumulate_grad(sources[j], mul(g, sum(mul(alpha, e), {last}, true)));  // [.., D]·[.., 1]
    if (alpha.requires_grad()) {
      const Tensor term = mul(sum(mul(g, sources[j]), {last}, true), e);  // [.., 1]·[J]
      dalpha = j == 0 ? term : add(dalpha, term);
    }
  }
  if (alpha.requires_grad()) accumulate_grad(alpha, dalpha);
}
}  // namespace

Tensor depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha) {
  ScopedOpTimer op_timer(OpFamily::mixing);
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
  if (tracing()) trace_op(op, inputs, {out});  // the sources, then alpha
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
    }).differentiable([sources, alpha](const Tensor& g, const Tensor&) {
      depth_mix_recorded(sources, alpha, g);
    });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h)
#include "autograd/gradcheck.h"

namespace dg {

// data table: the arithmetic family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> arithmetic_op_cases() {
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
  // Inputs uniform in [lo, hi) with every |x| >= gap: no element sits on a kink at 0.
  auto away = [](Shape s, uint64_t seed, double lo, double hi, double gap, const char* name) {
    return random_tensor_away_from_zero(s, seed, lo, hi, gap).set_name(name);
  };
  auto one_away = [=](Shape s, double lo = -2, double hi = 2) {
    return [=] { return std::vector<Tensor>{away(s, 61, lo, hi, 0.05, "a")}; };
  };
  auto two_away = [=](Shape sa, Shape sb, double lo = -2, double hi = 2) {
    return [=] {
      return std::vector<Tensor>{away(sa, 62, lo, hi, 0.05, "a"), away(sb, 63, lo, hi, 0.05, "b")};
    };
  };
  // a 0/1 condition of `shape` (period 3 along the flat index), in dtype `dtype`
  auto cond = [](Shape s) {  // bool: True except at every third element
    std::vector<bool> v(shape_numel(s));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 != 1;
    return Tensor::from_vector(v, s).set_name("cond");
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
      {"pow_tensor/broadcast", two_away({2, 3, 4}, {3, 1}, 0.3, 2),
       [](V in) { return pow(in[0], in[1]); }},
      {"pow_tensor/base broadcast", two_away({4}, {2, 4}, 0.3, 2),
       [](V in) { return pow(in[0], in[1]); }},
      {"minimum/broadcast", two_away({2, 3, 4}, {3, 1}),
       [](V in) { return minimum(in[0], in[1]); }},
      {"maximum/broadcast", two_away({4}, {2, 3, 4}), [](V in) { return maximum(in[0], in[1]); }},
      {"where/bool cond [3, 1] broadcast",
       [=] {
         return std::vector<Tensor>{cond({3, 1}), away({3, 4}, 65, -2, 2, 0, "a"),
                                    away({4}, 66, -2, 2, 0, "b")};
       },
       [](V in) { return where(in[0], in[1], in[2]); }},
      {"where/bool cond [2, 3, 4], a and b broadcast",
       [=] {
         return std::vector<Tensor>{cond({2, 3, 4}), away({3, 4}, 67, -2, 2, 0, "a"),
                                    away({2, 1, 4}, 68, -2, 2, 0, "b")};
       },
       [](V in) { return where(in[0], in[1], in[2]); }},
      {"where/cond from a comparison, scalar other (torch.where(x > 0, x, 0.1 * x) and 0.0)",
       [=] {
         return std::vector<Tensor>{away({3, 4}, 64, -2, 2, 0.1, "x")};
       },
       [](V in) {
         return add(where(gt(in[0], 0.0), in[0], scale(in[0], 0.1)),
                    where(lt(in[0], 0.5), 0.0, square(in[0])));
       }},
      {"triu/diagonal 1 over [2, 3, 4]", one_away({2, 3, 4}), [](V in) { return triu(in[0], 1); }},
      {"tril/diagonal -1 over [4, 3]", one_away({4, 3}), [](V in) { return tril(in[0], -1); }},
      {"masked_fill/bool mask [3, 1] broadcast",
       [=] {
         return std::vector<Tensor>{away({2, 3, 4}, 69, -2, 2, 0, "a"), cond({3, 1})};
       },
       [](V in) { return masked_fill(in[0], in[1], -1.5); }},
      {"masked_fill/mask from a comparison, -inf then softmax (the attention idiom)",
       [=] {
         return std::vector<Tensor>{away({3, 5}, 63, -2, 2, 0, "scores")};
       },
       [](V in) {
         const Tensor future = Tensor::from_vector(
             std::vector<bool>{0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1}, {3, 5});
         return softmax(masked_fill(in[0], future, -std::numeric_limits<double>::infinity()), -1);
       }},
      {"operators", two_away({2, 3}, {3}, 0.3, 2),
       [](V in) {
         const Tensor &a = in[0], &b = in[1];
         return (a + b) * (a - 2.0) / b - 1.5 / a + (1.0 - b) * 3.0 - -a / 4.0 + 2.0 * b - 0.5;
       }},
      {"depth_mix/J=1", mix_inputs(1), mix_fn},
      {"depth_mix/J=2", mix_inputs(2), mix_fn},
      {"depth_mix/J=3", mix_inputs(3), mix_fn},
  };
}

}  // namespace dg
