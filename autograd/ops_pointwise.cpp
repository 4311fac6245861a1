// Pointwise ops a user reaches for: activations, pow, minimum/maximum, where, masked_fill, the
// comparisons and the C++ operators, each forward beside its backward, gradient-check rows last.
// Derivatives at kinks follow torch; comparisons return 0/1 in a float dtype (no bool tensors).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_pointwise.h"
#include "tensor/profile.h"

namespace dg {

namespace {

// t broadcast to `shape` as a contiguous tensor (t itself when it already is).
Tensor expanded(const Tensor& t, const Shape& shape) {
  return t.shape() == shape ? kernel_input(t) : t.view_expand(shape).contiguous();
}

// A mask of any dtype as a contiguous tensor of `shape` and `dtype` (nonzero: true).
Tensor mask_as(const Tensor& mask, const Shape& shape, DType dtype, const char* op) {
  check_arg(mask.defined(), op, mask, "a defined mask");
  Tensor m = mask.view_expand(shape);
  return m.dtype() == dtype ? kernel_input(m) : detach(m).to(dtype);
}

// y = f(x) elementwise with the unary kernel; the backward reads x and y.
Tensor unary_pointwise(const Tensor& a, UnaryOp kind, UnaryArgs args, const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  Tensor x = kernel_input(a);
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  const int64_t n = y.numel();
  dispatch_float(a.dtype(), op,
                 [&]<class T>() { pointwise_forward<T>(kind, args, y.data<T>(), x.data<T>(), n); });
  if (should_record({a}))
    record(op, {a}, y, [a, x, y = detach(y), kind, args, n, op](const Tensor& g) {
      Tensor gc = g.contiguous();
      Tensor ga = Tensor::empty(a.shape(), a.dtype());
      dispatch_float(a.dtype(), op, [&]<class T>() {
        pointwise_backward<T>(kind, args, ga.data<T>(), gc.data<T>(), x.data<T>(), y.data<T>(), n);
      });
      accumulate_grad(a, ga);
    });
  return y;
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
  if (should_record({a, b}))
    record(op, {a, b}, y, [a, b, y = detach(y), kind, op](const Tensor& g) {
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
  return y;
}

}  // namespace

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

Tensor abs(const Tensor& a) { return unary_pointwise(a, UnaryOp::abs, {}, "abs"); }

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  if (!min && !max) throw std::invalid_argument("clamp: at least one of min and max must be given");
  const double inf = std::numeric_limits<double>::infinity();
  return unary_pointwise(a, UnaryOp::clamp, {min.value_or(-inf), max.value_or(inf)}, "clamp");
}

Tensor pow(const Tensor& a, double exponent) {
  return unary_pointwise(a, UnaryOp::pow, {exponent, 0}, "pow");
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
  check_arg(cond.defined(), op, cond, "a defined condition");
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), op), b.shape(), op);
  Tensor c = mask_as(cond, shape, a.dtype(), op);
  Tensor ae = expanded(a, shape), be = expanded(b, shape);
  Tensor y = Tensor::empty(shape, a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    where_forward<T>(y.data<T>(), c.data<T>(), ae.data<T>(), be.data<T>(), y.numel());
  });
  if (should_record({a, b}))
    record(op, {a, b}, y, [a, b, c](const Tensor& g) {
      Tensor gc = g.contiguous(), ga, gb;
      if (a.requires_grad()) ga = Tensor::empty(c.shape(), a.dtype());
      if (b.requires_grad()) gb = Tensor::empty(c.shape(), b.dtype());
      dispatch_float(a.dtype(), "where", [&]<class T>() {
        where_backward<T>(ga.defined() ? ga.data<T>() : nullptr,
                          gb.defined() ? gb.data<T>() : nullptr, gc.data<T>(), c.data<T>(),
                          c.numel());
      });
      if (ga.defined()) accumulate_grad(a, ga);
      if (gb.defined()) accumulate_grad(b, gb);
    });
  return y;
}

// ---- masked_fill(a, mask, value): value where mask, else a; mask broadcasts to a's shape -------
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "masked_fill";
  check_float(a, op);
  check_arg(mask.defined(), op, mask, "a defined mask");
  if (broadcast_shapes(a.shape(), mask.shape(), op) != a.shape())
    throw std::invalid_argument(fmt::format("masked_fill: mask {} does not broadcast to {}",
                                            mask.describe(), a.describe()));
  Tensor c = mask_as(mask, a.shape(), a.dtype(), op);
  Tensor x = kernel_input(a), fill = Tensor::full(a.shape(), value, a.dtype());
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    where_forward<T>(y.data<T>(), c.data<T>(), fill.data<T>(), x.data<T>(), y.numel());
  });
  if (should_record({a}))
    record(op, {a}, y, [a, c](const Tensor& g) {
      Tensor gc = g.contiguous(), ga = Tensor::empty(a.shape(), a.dtype());
      dispatch_float(a.dtype(), "masked_fill", [&]<class T>() {
        where_backward<T>(nullptr, ga.data<T>(), gc.data<T>(), c.data<T>(), c.numel());
      });
      accumulate_grad(a, ga);
    });
  return y;
}

// ---- comparisons: 0/1 in the input's float dtype (float32 for integer inputs); never recorded --
namespace {

// Calls f.template operator()<I, O>() for the input dtype I and the output dtype O.
template <class F>
Tensor compare_into(const Tensor& a, const Shape& shape, const char* op, F f) {
  check_arg(a.defined(), op, a, "a defined tensor");
  const DType out_dtype = is_floating(a.dtype()) ? a.dtype() : DType::f32;
  Tensor out = Tensor::empty(shape, out_dtype);
  switch (a.dtype()) {
    case DType::f32:
      f.template operator()<float, float>(out);
      break;
    case DType::f64:
      f.template operator()<double, double>(out);
      break;
    case DType::i32:
      f.template operator()<int32_t, float>(out);
      break;
    case DType::i64:
      f.template operator()<int64_t, float>(out);
      break;
  }
  return out;
}

Tensor compare(const Tensor& a, const Tensor& b, CompareOp kind, const char* op) {
  check_arg(b.defined(), op, b, "a defined tensor");
  check_same_dtype(a, b, op);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor ae = expanded(a, shape), be = expanded(b, shape);
  return compare_into(a, shape, op, [&]<class I, class O>(Tensor& out) {
    compare_kernel<I, O>(kind, out.data<O>(), ae.data<I>(), be.data<I>(), out.numel());
  });
}

Tensor compare(const Tensor& a, double s, CompareOp kind, const char* op) {
  check_arg(a.defined(), op, a, "a defined tensor");
  Tensor x = kernel_input(a);
  return compare_into(a, a.shape(), op, [&]<class I, class O>(Tensor& out) {
    compare_scalar_kernel<I, O>(kind, out.data<O>(), x.data<I>(), s, out.numel());
  });
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::eq, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::ne, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::lt, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::le, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::gt, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::ge, "ge"); }
Tensor eq(const Tensor& a, double b) { return compare(a, b, CompareOp::eq, "eq"); }
Tensor ne(const Tensor& a, double b) { return compare(a, b, CompareOp::ne, "ne"); }
Tensor lt(const Tensor& a, double b) { return compare(a, b, CompareOp::lt, "lt"); }
Tensor le(const Tensor& a, double b) { return compare(a, b, CompareOp::le, "le"); }
Tensor gt(const Tensor& a, double b) { return compare(a, b, CompareOp::gt, "gt"); }
Tensor ge(const Tensor& a, double b) { return compare(a, b, CompareOp::ge, "ge"); }

// ---- C++ operators: each is one named op, recorded as that op --------------------------------
namespace {
Tensor scalar_like(double value, const Tensor& t) {  // a 0-d tensor of t's dtype
  return Tensor::full({}, value, t.dtype());
}
}  // namespace

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

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h)
#include "autograd/gradcheck.h"

namespace dg {

std::vector<OpCase> pointwise_op_cases() {
  using V = const std::vector<Tensor>&;
  // Inputs uniform in [lo, hi) with every |x| >= gap: no element sits on a kink at 0.
  auto away = [](Shape s, uint64_t seed, double lo, double hi, double gap, const char* name) {
    Tensor t = random_tensor(s, seed, lo, hi);
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::fabs(p[i]) < gap) p[i] += p[i] < 0 ? -gap : gap;
    return t.set_name(name);
  };
  auto one = [=](Shape s, double lo = -2, double hi = 2) {
    return [=] { return std::vector<Tensor>{away(s, 61, lo, hi, 0.05, "a")}; };
  };
  auto two = [=](Shape sa, Shape sb, double lo = -2, double hi = 2) {
    return [=] {
      return std::vector<Tensor>{away(sa, 62, lo, hi, 0.05, "a"), away(sb, 63, lo, hi, 0.05, "b")};
    };
  };
  // a 0/1 condition of `shape` (period 3 along the flat index), in dtype `dtype`
  auto cond = [](Shape s, DType dtype) {
    std::vector<double> v(shape_numel(s));
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 1 ? 0.0 : 1.0;
    return Tensor::from_vector(v, s, dtype).set_name("cond");
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
      {"abs", one({4, 5}), [](V in) { return abs(in[0]); }},
      // bounds off the grid of round numbers; these seeds put no input within ε of one
      {"clamp/min max", one({4, 5}), [](V in) { return clamp(in[0], -0.751, 0.749); }},
      {"clamp/min only", one({4, 5}), [](V in) { return clamp(in[0], 0.251); }},
      {"clamp/max only", one({4, 5}), [](V in) { return clamp(in[0], std::nullopt, -0.249); }},
      {"pow/2", one({3, 4}), [](V in) { return pow(in[0], 2.0); }},
      {"pow/3", one({3, 4}), [](V in) { return pow(in[0], 3.0); }},
      {"pow/-1", one({3, 4}, 0.3, 2), [](V in) { return pow(in[0], -1.0); }},
      {"pow/0.5", one({3, 4}, 0.3, 2), [](V in) { return pow(in[0], 0.5); }},
      {"pow/-0.5", one({3, 4}, 0.3, 2), [](V in) { return pow(in[0], -0.5); }},
      {"pow/2.7", one({3, 4}, 0.3, 2), [](V in) { return pow(in[0], 2.7); }},
      {"pow/0", one({3, 4}), [](V in) { return pow(in[0], 0.0); }},
      {"pow_tensor/broadcast", two({2, 3, 4}, {3, 1}, 0.3, 2),
       [](V in) { return pow(in[0], in[1]); }},
      {"pow_tensor/base broadcast", two({4}, {2, 4}, 0.3, 2),
       [](V in) { return pow(in[0], in[1]); }},
      {"minimum/broadcast", two({2, 3, 4}, {3, 1}), [](V in) { return minimum(in[0], in[1]); }},
      {"maximum/broadcast", two({4}, {2, 3, 4}), [](V in) { return maximum(in[0], in[1]); }},
      {"where/float cond broadcast",
       [=] {
         return std::vector<Tensor>{cond({3, 1}, DType::f64), away({3, 4}, 65, -2, 2, 0, "a"),
                                    away({4}, 66, -2, 2, 0, "b")};
       },
       [](V in) { return where(in[0], in[1], in[2]); }},
      {"where/int cond broadcast",
       [=] {
         return std::vector<Tensor>{cond({2, 3, 4}, DType::i32), away({3, 4}, 67, -2, 2, 0, "a"),
                                    away({2, 1, 4}, 68, -2, 2, 0, "b")};
       },
       [](V in) { return where(in[0], in[1], in[2]); }},
      {"masked_fill/broadcast mask",
       [=] {
         return std::vector<Tensor>{away({2, 3, 4}, 69, -2, 2, 0, "a"), cond({3, 1}, DType::i64)};
       },
       [](V in) { return masked_fill(in[0], in[1], -1.5); }},
      {"operators", two({2, 3}, {3}, 0.3, 2),
       [](V in) {
         const Tensor &a = in[0], &b = in[1];
         return (a + b) * (a - 2.0) / b - 1.5 / a + (1.0 - b) * 3.0 - -a / 4.0 + 2.0 * b - 0.5;
       }},
  };
}

}  // namespace dg
