// Functions of one tensor, elementwise: exp, log, sqrt, the elementary functions (sin, cos,
// log1p, expm1, square, rsqrt, erf; sign, floor, ceil, round with zero gradient), abs, clamp and
// pow by a scalar. Each forward beside its backward, gradient-check rows last. Arithmetic of two
// tensors is in ops_arithmetic.cpp, activations in ops_activation.cpp. Derivatives at kinks follow
// torch. create_graph (autograd/tape.h): every op here supports it. log and the elementary
// functions have composed backwards (expm1 and rsqrt: from the output); exp and sqrt keep their
// backward and use the output with its graph under create_graph; abs, clamp and pow by a scalar
// go through unary_pointwise (autograd/op_util.h), as the activations do. Checks: the rows
// at the end (tests/test_gradcheck_ops.cpp runs them; their second derivatives
// tests/test_gradgradcheck_pointwise.cpp), the kernels in tests/test_kernels_pointwise.cpp, the
// elementary functions against torch in tests/test_elementary_ops.cpp. exp_backward is an
// exercise of the learner's path's chapter 3 (autograd/learn-03-an-op.md): a weak definition
// (tensor/exercise.h) a learner's may replace.
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/profile.h"

namespace dg {

// ---- exp: d = g·exp(a) = g·out
Tensor exp(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "exp", [](auto x) { return std::exp(x); });
  if (should_record({a}))
    record("exp", {a}, out, [a, out = detach(out)](const Tensor& g) { exp_backward(g, a, out); })
        .saves({out})
        .differentiable([a](const Tensor& g, const Tensor& out) {
          exp_backward(g, a, out);  // out with its graph: d²/da² exp(a) = exp(a)
        });
  return out;
}

// g, a, out [..]: the saved output is the derivative, so nothing is computed again.
DG_EXERCISE void exp_backward(const Tensor& g, const Tensor& a, const Tensor& out) {
  accumulate_grad(a, mul(g, out));
}

// ---- log: d = g / a
Tensor log(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "log", [](auto x) { return std::log(x); });
  if (should_record({a}))
    record("log", {a}, out, [a](const Tensor& g) { accumulate_grad(a, div(g, a)); }).composed();
  return out;
}

// ---- sqrt: d = g / (2·sqrt(a)) = g / (2·out)
Tensor sqrt(const Tensor& a) {
  ScopedOpTimer op_timer(OpFamily::other);
  Tensor out = unary(a, "sqrt", [](auto x) { return std::sqrt(x); });
  if (should_record({a}))
    record("sqrt", {a}, out,
           [a, out = detach(out)](const Tensor& g) { accumulate_grad(a, div(g, scale(out, 2.0))); })
        .saves({out})
        .differentiable([a](const Tensor& g, const Tensor& out) {
          accumulate_grad(a, div(g, scale(out, 2.0)));  // out with its graph
        });
  return out;
}

// ---- elementary functions: y = f(a), backward g·f'(a) from recorded ops -----------------------
namespace {
// What an elementary op's backward reads: its input, its output, or only shapes (f' = 0).
enum class Reads { input, output, nothing };
using Derivative = Tensor (*)(const Tensor& g, const Tensor& a, const Tensor& out);

// y = f(a) elementwise; the backward adds derivative(g, a, out) = g·f'(a) into a's gradient. It is
// written with recorded ops: composed when it reads a (or nothing); when it reads the output it
// gets out with its graph under create_graph (differentiable), detached otherwise.
template <class F>
Tensor elementary(const Tensor& a, const char* op, F f, Reads reads, Derivative derivative) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_float(a, op);
  Tensor out = unary(a, op, f);
  if (!should_record({a})) return out;
  if (reads == Reads::output) {
    record(op, {a}, out,
           [a, out = detach(out), derivative](const Tensor& g) {
             accumulate_grad(a, derivative(g, a, out));
           })
        .saves({out})
        .differentiable([a, derivative](const Tensor& g, const Tensor& out) {
          accumulate_grad(a, derivative(g, a, out));  // out with its graph
        });
  } else {
    RecordedNode node = record(op, {a}, out, [a, derivative](const Tensor& g) {
      accumulate_grad(a, derivative(g, a, Tensor()));
    });
    if (reads == Reads::nothing) node.saves({});
    node.composed();
  }
  return out;
}

// g·0 as torch's zeros_like(g): 0 even where g is NaN or infinite, and still a recorded op of g.
Tensor zero_gradient(const Tensor& g, const Tensor&, const Tensor&) {
  return masked_fill(g, Tensor::ones({}, DType::b8), 0.0);
}
}  // namespace

// sin' = cos, cos' = −sin
Tensor sin(const Tensor& a) {
  return elementary(
      a, "sin", [](auto x) { return std::sin(x); }, Reads::input,
      [](const Tensor& g, const Tensor& a, const Tensor&) { return mul(g, cos(a)); });
}
Tensor cos(const Tensor& a) {
  return elementary(
      a, "cos", [](auto x) { return std::cos(x); }, Reads::input,
      [](const Tensor& g, const Tensor& a, const Tensor&) { return neg(mul(g, sin(a))); });
}
// log1p' = 1/(1 + a), expm1' = e^a = out + 1
Tensor log1p(const Tensor& a) {
  return elementary(
      a, "log1p", [](auto x) { return std::log1p(x); }, Reads::input,
      [](const Tensor& g, const Tensor& a, const Tensor&) { return div(g, add_scalar(a, 1.0)); });
}
Tensor expm1(const Tensor& a) {
  return elementary(
      a, "expm1", [](auto x) { return std::expm1(x); }, Reads::output,
      [](const Tensor& g, const Tensor&, const Tensor& out) {
        return mul(g, add_scalar(out, 1.0));
      });
}
// square' = 2a; rsqrt' = −½a^(−3/2) = −½·out³
Tensor square(const Tensor& a) {
  return elementary(
      a, "square", [](auto x) { return x * x; }, Reads::input,
      [](const Tensor& g, const Tensor& a, const Tensor&) { return mul(g, scale(a, 2.0)); });
}
Tensor rsqrt(const Tensor& a) {
  return elementary(
      a, "rsqrt", [](auto x) { return decltype(x)(1) / std::sqrt(x); }, Reads::output,
      [](const Tensor& g, const Tensor&, const Tensor& out) {
        return mul(g, scale(mul(mul(out, out), out), -0.5));
      });
}
// erf' = 2/√π·e^(−a²)
Tensor erf(const Tensor& a) {
  return elementary(
      a, "erf", [](auto x) { return std::erf(x); }, Reads::input,
      [](const Tensor& g, const Tensor& a, const Tensor&) {
        return mul(g, scale(exp(neg(mul(a, a))), M_2_SQRTPI));
      });
}
// Piecewise constant: the gradient is 0 everywhere (torch's zeros_like). sign(0) = 0, sign(NaN) =
// 0; round is half to even (nearbyint in the default rounding mode), as torch.round.
Tensor sign(const Tensor& a) {
  return elementary(
      a, "sign",
      [](auto x) {
        using T = decltype(x);
        return static_cast<T>((T(0) < x) - (x < T(0)));
      },
      Reads::nothing, zero_gradient);
}
Tensor floor(const Tensor& a) {
  return elementary(
      a, "floor", [](auto x) { return std::floor(x); }, Reads::nothing, zero_gradient);
}
Tensor ceil(const Tensor& a) {
  return elementary(
      a, "ceil", [](auto x) { return std::ceil(x); }, Reads::nothing, zero_gradient);
}
Tensor round(const Tensor& a) {
  return elementary(
      a, "round", [](auto x) { return std::nearbyint(x); }, Reads::nothing, zero_gradient);
}

// ---- abs, clamp, pow by a scalar: y = f(x); f' as torch, at the kinks too ----------------------
Tensor abs(const Tensor& a) { return unary_pointwise(a, UnaryOp::abs, {}, "abs"); }

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  if (!min && !max) throw std::invalid_argument("clamp: at least one of min and max must be given");
  const double inf = std::numeric_limits<double>::infinity();
  return unary_pointwise(a, UnaryOp::clamp, {min.value_or(-inf), max.value_or(inf)}, "clamp");
}

Tensor pow(const Tensor& a, double exponent) {
  return unary_pointwise(a, UnaryOp::pow, {exponent, 0}, "pow");
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h)
#include "autograd/gradcheck.h"

namespace dg {

// data table: the unary family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> unary_op_cases() {
  using V = const std::vector<Tensor>&;
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
  // values k/4 + 1/8 + small noise: at least 0.1 from every integer and every half-integer
  auto off_steps = [](Shape s) {
    return [=] {
      Tensor r = random_tensor(s, 71, -0.02, 0.02);
      std::vector<double> v = r.to_vector();
      for (size_t i = 0; i < v.size(); ++i)
        v[i] += -2.875 + 0.25 * static_cast<double>((i * 7) % 23);
      Tensor t = Tensor::from_vector(v, s, DType::f64).set_name("a");
      t.set_requires_grad(true);
      return std::vector<Tensor>{t};
    };
  };
  return {
      {"exp", one({4, 5}), [](V in) { return exp(in[0]); }},
      {"log", one({4, 5}, 0.2, 3.0), [](V in) { return log(in[0]); }},
      {"sqrt", one({4, 5}, 0.2, 3.0), [](V in) { return sqrt(in[0]); }},
      {"sin", one({4, 5}, -3, 3), [](V in) { return sin(in[0]); }},
      {"cos", one({4, 5}, -3, 3), [](V in) { return cos(in[0]); }},
      {"log1p", one({4, 5}, -0.8, 3.0), [](V in) { return log1p(in[0]); }},
      {"expm1", one({4, 5}, -2, 2), [](V in) { return expm1(in[0]); }},
      {"square", one({4, 5}, -2, 2), [](V in) { return square(in[0]); }},
      {"rsqrt", one({4, 5}, 0.3, 3.0), [](V in) { return rsqrt(in[0]); }},
      {"erf", one({4, 5}, -2, 2), [](V in) { return erf(in[0]); }},
      // piecewise constant (zero gradient): inputs away from 0 and from every step (x.0 and x.5)
      {"sign", one_away({4, 5}), [](V in) { return sign(in[0]); }},
      {"floor", off_steps({4, 5}), [](V in) { return floor(in[0]); }},
      {"ceil", off_steps({4, 5}), [](V in) { return ceil(in[0]); }},
      {"round", off_steps({4, 5}), [](V in) { return round(in[0]); }},
      {"abs", one_away({4, 5}), [](V in) { return abs(in[0]); }},
      // bounds off the grid of round numbers; these seeds put no input within ε of one
      {"clamp/min max", one_away({4, 5}), [](V in) { return clamp(in[0], -0.751, 0.749); }},
      {"clamp/min only", one_away({4, 5}), [](V in) { return clamp(in[0], 0.251); }},
      {"clamp/max only", one_away({4, 5}), [](V in) { return clamp(in[0], std::nullopt, -0.249); }},
      {"pow/2", one_away({3, 4}), [](V in) { return pow(in[0], 2.0); }},
      {"pow/3", one_away({3, 4}), [](V in) { return pow(in[0], 3.0); }},
      {"pow/-1", one_away({3, 4}, 0.3, 2), [](V in) { return pow(in[0], -1.0); }},
      {"pow/0.5", one_away({3, 4}, 0.3, 2), [](V in) { return pow(in[0], 0.5); }},
      {"pow/-0.5", one_away({3, 4}, 0.3, 2), [](V in) { return pow(in[0], -0.5); }},
      {"pow/2.7", one_away({3, 4}, 0.3, 2), [](V in) { return pow(in[0], 2.7); }},
      {"pow/0", one_away({3, 4}), [](V in) { return pow(in[0], 0.0); }},
  };
}

}  // namespace dg
