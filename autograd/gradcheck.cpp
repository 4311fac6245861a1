// The public gradient checker (see gradcheck.h).
#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

namespace {

std::string index_str(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    index[k] = shape[k] ? flat % shape[k] : 0;
    if (shape[k]) flat /= shape[k];
  }
  return shape_str(index);
}

std::string input_label(const Tensor& t, size_t i) {
  return t.name().empty() ? fmt::format("input {}", i)
                          : fmt::format("input {} ('{}')", i, t.name());
}

// Σ W ⊙ f(inputs) without recording.
double weighted_loss(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                     const std::vector<double>& w) {
  NoGradGuard no_grad;
  Tensor out = fn(inputs);
  std::vector<double> v = out.to_vector();
  double acc = 0;
  for (size_t i = 0; i < v.size(); ++i) acc += w[i] * v[i];
  return acc;
}

std::vector<double> outputs(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector();
}

struct Checker {
  const std::string& name;
  const GradcheckOptions& opt;
  GradcheckResult& result;
  const char* what = "gradcheck";
  bool compare(double analytic, double numeric, const std::string& where) {
    double err = std::fabs(analytic - numeric);
    double tol = opt.atol + opt.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
    result.checks++;
    result.max_abs_error = std::max(result.max_abs_error, err);
    if (!(err <= tol)) {  // also catches NaN
      if (result.passed)
        result.message = fmt::format(
            "{} '{}': {}: expected (numeric) {:.10g}, received (analytic) {:.10g}, "
            "|difference| {:.3g} > tolerance {:.3g}",
            what, name, where, numeric, analytic, err, tol);
      result.passed = false;
      return false;
    }
    return true;
  }
};

}  // namespace

namespace {

void clear_grads(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined()) t.impl()->grad = Tensor();
}

// The analytic gradient of L = Σ W ⊙ f(inputs) for every input that requires grad (empty for the
// others), W [out's shape] drawn from rng: ±U(0.5, 1.5). Writes f's output and W.
std::vector<std::vector<double>> analytic_gradients(const std::string& name, const GradcheckFn& fn,
                                                    const std::vector<Tensor>& inputs,
                                                    std::mt19937_64& rng, Tensor& out,
                                                    std::vector<double>& w) {
  std::uniform_real_distribution<double> weight_dist(0.5, 1.5);
  clear_grads(inputs);
  out = fn(inputs);
  if (!out.requires_grad())
    throw std::invalid_argument(
        fmt::format("gradcheck '{}': the output does not require grad", name));
  if (out.dtype() != DType::f64)
    throw std::invalid_argument(
        fmt::format("gradcheck '{}': the output is {}, expected float64", name, out.describe()));
  w.assign(out.numel(), 0.0);
  for (double& x : w) x = weight_dist(rng) * (rng() & 1 ? 1.0 : -1.0);
  Tensor w_tensor = Tensor::from_vector(w, out.shape(), DType::f64);
  backward(out, w_tensor);
  std::vector<std::vector<double>> analytic(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    Tensor g = inputs[i].grad();
    analytic[i] = g.defined() ? g.to_vector() : std::vector<double>(inputs[i].numel(), 0.0);
    inputs[i].impl()->grad = Tensor();
  }
  return analytic;
}

// Input i's analytic gradient against central differences of L: every element up to
// full_max_numel elements, otherwise sampled elements and random directions (from rng, normal).
void check_numeric_gradient(Checker& check, const std::string& name, const GradcheckFn& fn,
                            const std::vector<Tensor>& inputs, size_t i,
                            const std::vector<double>& analytic, const std::vector<double>& w,
                            std::mt19937_64& rng, std::normal_distribution<double>& normal) {
  const GradcheckOptions& opt = check.opt;
  GradcheckResult& result = check.result;
  const Tensor& x = inputs[i];
  if (!x.is_contiguous())
    throw std::invalid_argument(
        fmt::format("gradcheck '{}': {} must be contiguous", name, input_label(x, i)));
  double* p = x.data<double>();
  const int64_t n = x.numel();
  auto element_check = [&](int64_t e) {
    double saved = p[e];
    p[e] = saved + opt.eps;
    double plus = weighted_loss(fn, inputs, w);
    p[e] = saved - opt.eps;
    double minus = weighted_loss(fn, inputs, w);
    p[e] = saved;
    double numeric = (plus - minus) / (2 * opt.eps);
    return check.compare(
        analytic[e], numeric,
        fmt::format("{} element {} (flat {})", input_label(x, i), index_str(x.shape(), e), e));
  };
  if (n <= opt.full_max_numel) {
    for (int64_t e = 0; e < n && result.passed; ++e) element_check(e);
    return;
  }
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int64_t s = 0; s < opt.sampled_elements && result.passed; ++s) element_check(pick(rng));
  std::vector<double> saved(p, p + n), v(n);
  for (int d = 0; d < opt.directions && result.passed; ++d) {
    double analytic_dir = 0;
    for (int64_t e = 0; e < n; ++e) {
      v[e] = normal(rng);
      analytic_dir += analytic[e] * v[e];
    }
    for (int64_t e = 0; e < n; ++e) p[e] = saved[e] + opt.eps * v[e];
    double plus = weighted_loss(fn, inputs, w);
    for (int64_t e = 0; e < n; ++e) p[e] = saved[e] - opt.eps * v[e];
    double minus = weighted_loss(fn, inputs, w);
    std::copy(saved.begin(), saved.end(), p);
    check.compare(analytic_dir, (plus - minus) / (2 * opt.eps),
                  fmt::format("{} along random direction {}", input_label(x, i), d));
  }
}

// Input i's full Jacobian [m outputs, n elements]: numeric columns from perturbed forwards
// against analytic rows, one backward per output element.
void check_jacobian(Checker& check, const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                    size_t i, int64_t m) {
  const GradcheckOptions& opt = check.opt;
  const Tensor& x = inputs[i];
  const int64_t n = x.numel();
  // numeric columns: J[:, e]
  std::vector<double> numeric(m * n);
  double* p = x.data<double>();
  for (int64_t e = 0; e < n; ++e) {
    double saved = p[e];
    p[e] = saved + opt.eps;
    std::vector<double> plus = outputs(fn, inputs);
    p[e] = saved - opt.eps;
    std::vector<double> minus = outputs(fn, inputs);
    p[e] = saved;
    for (int64_t o = 0; o < m; ++o) numeric[o * n + e] = (plus[o] - minus[o]) / (2 * opt.eps);
  }
  // analytic rows: one backward per output element
  for (int64_t o = 0; o < m && check.result.passed; ++o) {
    clear_grads(inputs);
    Tensor y = fn(inputs);
    Tensor onehot = Tensor::zeros(y.shape(), DType::f64);
    onehot.data<double>()[o] = 1.0;
    backward(y, onehot);
    Tensor g = x.grad();
    std::vector<double> row = g.defined() ? g.to_vector() : std::vector<double>(n, 0.0);
    for (int64_t e = 0; e < n && check.result.passed; ++e)
      check.compare(row[e], numeric[o * n + e],
                    fmt::format("Jacobian d output{} / d {} element {}", index_str(y.shape(), o),
                                input_label(x, i), index_str(x.shape(), e)));
  }
  clear_grads(inputs);
}

}  // namespace

GradcheckResult gradcheck(const std::string& name, const GradcheckFn& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  GradcheckResult result;
  Checker check{name, opt, result};
  std::mt19937_64 rng(opt.seed);
  std::normal_distribution<double> normal(0.0, 1.0);

  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad() && inputs[i].dtype() != DType::f64)
      throw std::invalid_argument(
          fmt::format("gradcheck '{}': {} is {}; gradcheck needs float64 inputs", name,
                      input_label(inputs[i], i), inputs[i].describe()));

  // ---- analytic gradient of L = Σ W ⊙ out
  Tensor out;
  std::vector<double> w;
  const std::vector<std::vector<double>> analytic =
      analytic_gradients(name, fn, inputs, rng, out, w);

  // ---- numeric gradient by central differences
  for (size_t i = 0; i < inputs.size() && result.passed; ++i)
    if (inputs[i].requires_grad())
      check_numeric_gradient(check, name, fn, inputs, i, analytic[i], w, rng, normal);

  // ---- full Jacobian for small cases
  const int64_t m = out.numel();
  for (size_t i = 0; i < inputs.size() && result.passed; ++i)
    if (inputs[i].requires_grad() && m * inputs[i].numel() <= opt.jacobian_max_entries)
      check_jacobian(check, fn, inputs, i, m);
  return result;
}

// ---- gradgradcheck ------------------------------------------------------------------------------

namespace {

// What gradgradcheck differentiates: the inputs that require grad, W and U.
struct SecondOrderSetup {
  std::vector<size_t> checked;         // indices of the inputs that require grad
  Shape out_shape;                     // f's output shape
  std::vector<double> w;               // one weight per output element
  std::vector<std::vector<double>> u;  // per checked input, one weight per element
};

std::vector<Tensor> checked_inputs(const std::vector<Tensor>& inputs, const SecondOrderSetup& s) {
  std::vector<Tensor> xs;
  for (size_t i : s.checked) xs.push_back(inputs[i]);
  return xs;
}

// Σ U ⊙ G as a double, G the per-input gradients (undefined: zero).
double weighted_sum(const std::vector<Tensor>& g, const SecondOrderSetup& s) {
  double h = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    if (!g[k].defined()) continue;
    const std::vector<double> v = g[k].to_vector();
    for (size_t e = 0; e < v.size(); ++e) h += s.u[k][e] * v[e];
  }
  return h;
}

// G = ∂/∂x Σ W ⊙ f(x) with the plain backward (no create_graph): what gradcheck trusts.
std::vector<Tensor> plain_first_derivative(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                           const SecondOrderSetup& s) {
  Tensor out = fn(inputs);
  return grad({out}, checked_inputs(inputs, s), {Tensor::from_vector(s.w, out.shape(), DType::f64)},
              false, false, true);
}

// Central differences of H(x, W) = Σ U ⊙ G along `perturb` (which moves x or W by ±ε·direction).
template <class Perturb>
double numeric_h_derivative(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                            SecondOrderSetup& s, double eps, Perturb perturb) {
  perturb(+eps);
  const double plus = weighted_sum(plain_first_derivative(fn, inputs, s), s);
  perturb(-2 * eps);
  const double minus = weighted_sum(plain_first_derivative(fn, inputs, s), s);
  perturb(+eps);
  return (plus - minus) / (2 * eps);
}

// Compares `analytic` (∂H/∂ of a flat buffer `p` of n elements) with central differences.
void check_flat(Checker& check, const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                SecondOrderSetup& s, double* p, const Shape& shape,
                const std::vector<double>& analytic, const std::string& label,
                std::mt19937_64& rng) {
  const GradcheckOptions& opt = check.opt;
  const int64_t n = shape_numel(shape);
  auto element = [&](int64_t e) {
    const double numeric =
        numeric_h_derivative(fn, inputs, s, opt.eps, [&](double d) { p[e] += d; });
    check.compare(analytic[e], numeric,
                  fmt::format("d²: {} element {} (flat {})", label, index_str(shape, e), e));
  };
  // Each numeric H is a forward and a backward: a smaller full check than gradcheck's.
  if (n <= std::min<int64_t>(opt.full_max_numel, 512)) {
    for (int64_t e = 0; e < n && check.result.passed; ++e) element(e);
    return;
  }
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int64_t k = 0; k < opt.sampled_elements / 4 && check.result.passed; ++k) element(pick(rng));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(n);
  for (int d = 0; d < std::max(1, opt.directions / 2) && check.result.passed; ++d) {
    double analytic_dir = 0;
    for (int64_t e = 0; e < n; ++e) analytic_dir += analytic[e] * (v[e] = normal(rng));
    const double numeric = numeric_h_derivative(fn, inputs, s, opt.eps, [&](double d) {
      for (int64_t e = 0; e < n; ++e) p[e] += d * v[e];
    });
    check.compare(analytic_dir, numeric, fmt::format("d²: {} along random direction {}", label, d));
  }
}

}  // namespace

GradcheckResult gradgradcheck(const std::string& name, const GradcheckFn& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  GradcheckResult result;
  Checker check{name, opt, result, "gradgradcheck"};
  std::mt19937_64 rng(opt.seed + 7);
  std::uniform_real_distribution<double> weight_dist(0.5, 1.5);
  auto weight = [&] { return weight_dist(rng) * (rng() & 1 ? 1.0 : -1.0); };

  SecondOrderSetup s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    if (inputs[i].dtype() != DType::f64 || !inputs[i].is_contiguous())
      throw std::invalid_argument(
          fmt::format("gradgradcheck '{}': {} is {}; it needs contiguous float64 inputs", name,
                      input_label(inputs[i], i), inputs[i].describe()));
    s.checked.push_back(i);
  }
  Tensor out = fn(inputs);
  if (!out.requires_grad() || out.dtype() != DType::f64)
    throw std::invalid_argument(
        fmt::format("gradgradcheck '{}': the output {} must be float64 and require grad", name,
                    out.describe()));
  s.out_shape = out.shape();
  s.w.resize(static_cast<size_t>(out.numel()));
  for (double& x : s.w) x = weight();
  for (size_t i : s.checked) {
    s.u.emplace_back(static_cast<size_t>(inputs[i].numel()));
    for (double& x : s.u.back()) x = weight();
  }

  // ---- G recorded by create_graph, H = Σ U ⊙ G, and H's gradient by a backward through it
  const std::vector<Tensor> xs = checked_inputs(inputs, s);
  Tensor w_tensor = Tensor::from_vector(s.w, s.out_shape, DType::f64);
  w_tensor.set_requires_grad(true);
  std::vector<Tensor> g = grad({out}, xs, {w_tensor}, true, /*create_graph=*/true, true);
  Tensor h;
  for (size_t k = 0; k < g.size(); ++k) {
    if (!g[k].defined()) continue;
    Tensor term = sum(mul(g[k], Tensor::from_vector(s.u[k], xs[k].shape(), DType::f64)));
    h = h.defined() ? add(h, term) : term;
  }
  std::vector<Tensor> wrt = xs;
  wrt.push_back(w_tensor);
  std::vector<Tensor> dh(wrt.size());
  if (h.defined() && h.requires_grad()) dh = grad({h}, wrt, {}, false, false, true);
  auto flat = [](const Tensor& t, int64_t n) {
    return t.defined() ? t.to_vector() : std::vector<double>(static_cast<size_t>(n), 0.0);
  };

  // ---- 1. the recorded first derivative equals the plain one
  const std::vector<Tensor> g_plain = plain_first_derivative(fn, inputs, s);
  for (size_t k = 0; k < xs.size() && result.passed; ++k) {
    const std::vector<double> a = flat(g[k], xs[k].numel()), b = flat(g_plain[k], xs[k].numel());
    for (size_t e = 0; e < a.size() && result.passed; ++e)
      check.compare(a[e], b[e],
                    fmt::format("first derivative recorded by create_graph, {} element {}",
                                input_label(xs[k], s.checked[k]),
                                index_str(xs[k].shape(), static_cast<int64_t>(e))));
  }
  // ---- 2. ∂H/∂x and ∂H/∂W against central differences of H
  for (size_t k = 0; k < xs.size() && result.passed; ++k)
    check_flat(check, fn, inputs, s, xs[k].data<double>(), xs[k].shape(),
               flat(dh[k], xs[k].numel()), input_label(xs[k], s.checked[k]), rng);
  if (result.passed)
    check_flat(check, fn, inputs, s, s.w.data(), s.out_shape,
               flat(dh.back(), static_cast<int64_t>(s.w.size())), "the output's gradient W", rng);
  return result;
}

}  // namespace dg

namespace dg {

Tensor random_tensor(const Shape& shape, uint64_t seed, double low, double high,
                     bool requires_grad) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> values(shape_numel(shape));
  for (double& v : values) v = dist(rng);
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor random_tensor_away_from_zero(const Shape& shape, uint64_t seed, double low, double high,
                                    double gap) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> values(shape_numel(shape));
  for (double& v : values) {
    v = dist(rng);
    if (std::fabs(v) < gap) v += v < 0 ? -gap : gap;
  }
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  t.set_requires_grad(true);
  return t;
}

// One row per family: its name (the file autograd/ops_<name>.cpp) and <name>_op_cases, typed once.
// clang-format off
#define FAMILY(name) OpCaseFamily{#name, name##_op_cases}
const std::vector<OpCaseFamily>& op_case_families() {
  static const std::vector<OpCaseFamily> families = {
      FAMILY(arithmetic), FAMILY(unary), FAMILY(activation), FAMILY(reduce), FAMILY(shape),
      FAMILY(index), FAMILY(matmul), FAMILY(embedding), FAMILY(softmax), FAMILY(loss),
      FAMILY(loss_regression), FAMILY(norm), FAMILY(batchnorm), FAMILY(attention), FAMILY(dropout),
      FAMILY(conv), FAMILY(sdpa), FAMILY(recurrent), FAMILY(sort), FAMILY(pad), FAMILY(resize),
      FAMILY(indexing), FAMILY(quantized)};
  return families;
}
#undef FAMILY
// clang-format on

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (const OpCaseFamily& family : op_case_families()) {
    std::vector<OpCase> rows = family.cases();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

std::vector<OpCase> elementwise_op_cases() {
  std::vector<OpCase> rows = arithmetic_op_cases();
  for (OpCase& c : unary_op_cases()) rows.push_back(std::move(c));
  return rows;
}

namespace {

// Gradients of L = Σ W ⊙ fn(inputs) with every floating input cast to `dtype`, as fresh leaves
// that require grad where the original does (an input listed twice stays one tensor, so aliasing
// rows keep their aliasing). W is drawn from `seed`: the same weights for both dtypes.
std::vector<std::vector<double>> weighted_loss_gradients(const OpCase& c,
                                                         const std::vector<Tensor>& inputs,
                                                         DType dtype, uint64_t seed) {
  std::vector<Tensor> cast;
  std::vector<std::pair<const TensorImpl*, Tensor>> made;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !is_floating(t.dtype())) {
      cast.push_back(t);
      continue;
    }
    auto same =
        std::find_if(made.begin(), made.end(), [&](const auto& m) { return m.first == t.impl(); });
    if (same != made.end()) {
      cast.push_back(same->second);
      continue;
    }
    Tensor copy = t.dtype() == dtype ? raw::clone(t) : detach(t).to(dtype);  // a new leaf
    copy.set_requires_grad(t.requires_grad());
    made.emplace_back(t.impl(), copy);
    cast.push_back(copy);
  }
  Tensor y = c.fn(cast);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> weight_dist(0.5, 1.5);
  std::vector<double> w(y.numel());
  for (double& x : w) x = weight_dist(rng) * (rng() & 1 ? 1.0 : -1.0);
  backward(y, Tensor::from_vector(w, y.shape(), y.dtype()));
  std::vector<std::vector<double>> grads(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    Tensor g = cast[i].grad();
    grads[i] = g.defined() ? g.to_vector() : std::vector<double>(inputs[i].numel(), 0.0);
  }
  return grads;
}

// The float32 backward of a row against its float64 backward (see OpCase).
void compare_f32_gradients(const OpCase& c, const std::vector<Tensor>& inputs, OpCaseResult& r) {
  const uint64_t seed = c.options.seed + 1;
  std::vector<std::vector<double>> g64 = weighted_loss_gradients(c, inputs, DType::f64, seed);
  std::vector<std::vector<double>> g32 = weighted_loss_gradients(c, inputs, DType::f32, seed);
  for (size_t i = 0; i < inputs.size() && r.f32_grad_passed; ++i) {
    if (g64[i].empty()) continue;
    double scale = 0;
    for (double v : g64[i]) scale = std::max(scale, std::fabs(v));
    for (size_t e = 0; e < g64[i].size(); ++e) {
      const double err = std::fabs(g32[i][e] - g64[i][e]);
      r.f32_grad_max_error = std::isnan(err) ? INFINITY : std::max(r.f32_grad_max_error, err);
      const double tolerance =
          c.f32_grad_rtol * std::fabs(g64[i][e]) + c.f32_grad_atol * (1 + scale);
      if (!(err <= tolerance)) {
        r.f32_grad_passed = false;
        r.f32_grad_message = fmt::format(
            "'{}': float32 gradient of {} element {} is {:.9g}, float64 gives {:.9g} (|difference| "
            "{:.3g} > "
            "tolerance {:.3g})",
            c.name, input_label(inputs[i], i),
            index_str(inputs[i].shape(), static_cast<int64_t>(e)), g32[i][e], g64[i][e], err,
            tolerance);
        break;
      }
    }
  }
}

}  // namespace

OpCaseResult run_op_case(const OpCase& c) {
  OpCaseResult r;
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> inputs = c.make_inputs();
  r.grad = gradcheck(c.name, c.fn, inputs, c.options);
  // float32 forward against float64.
  std::vector<Tensor> inputs32;
  for (const Tensor& t : inputs)
    inputs32.push_back(t.defined() && is_floating(t.dtype()) ? detach(t).to(DType::f32) : t);
  std::vector<double> y64, y32;
  {
    NoGradGuard no_grad;
    y64 = c.fn(inputs).to_vector();
    y32 = c.fn(inputs32).to_vector();
  }
  double scale = 0;
  for (double v : y64) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < y64.size(); ++i) {
    double err = std::fabs(y32[i] - y64[i]);
    if (!(err <= r.f32_max_error))
      r.f32_max_error = std::isnan(err) ? INFINITY : std::max(r.f32_max_error, err);
  }
  if (y32.size() != y64.size() || !(r.f32_max_error <= c.f32_tolerance * (1 + scale))) {
    r.f32_passed = false;
    r.f32_message =
        fmt::format("'{}': float32 forward differs from float64 by {:.3g} (tolerance {:.3g})",
                    c.name, r.f32_max_error, c.f32_tolerance * (1 + scale));
  }
  compare_f32_gradients(c, inputs, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

OpCaseGradgradResult run_op_case_gradgrad(const OpCase& c) {
  OpCaseGradgradResult r;
  auto start = std::chrono::steady_clock::now();
  try {
    r.grad = gradgradcheck(c.name, c.fn, c.make_inputs(), c.options);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find("create_graph") == std::string::npos) throw;
    r.supported = false;
    r.grad.passed = false;
    r.grad.message = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace dg
