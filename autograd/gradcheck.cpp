// The public gradient checker (see gradcheck.h).
#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

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
  bool compare(double analytic, double numeric, const std::string& where) {
    double err = std::fabs(analytic - numeric);
    double tol = opt.atol + opt.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
    result.checks++;
    result.max_abs_error = std::max(result.max_abs_error, err);
    if (!(err <= tol)) {  // also catches NaN
      if (result.passed)
        result.message = fmt::format(
            "gradcheck '{}': {}: expected (numeric) {:.10g}, received (analytic) {:.10g}, "
            "|difference| {:.3g} > tolerance {:.3g}",
            name, where, numeric, analytic, err, tol);
      result.passed = false;
      return false;
    }
    return true;
  }
};

}  // namespace

GradcheckResult gradcheck(const std::string& name, const GradcheckFn& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  GradcheckResult result;
  Checker check{name, opt, result};
  std::mt19937_64 rng(opt.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> weight_dist(0.5, 1.5);

  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad() && inputs[i].dtype() != DType::f64)
      throw std::invalid_argument(
          fmt::format("gradcheck '{}': {} is {}; gradcheck needs float64 inputs", name,
                      input_label(inputs[i], i), inputs[i].describe()));

  // ---- analytic gradient of L = Σ W ⊙ out
  for (const Tensor& t : inputs)
    if (t.defined()) t.impl()->grad = Tensor();
  Tensor out = fn(inputs);
  if (!out.requires_grad())
    throw std::invalid_argument(
        fmt::format("gradcheck '{}': the output does not require grad", name));
  if (out.dtype() != DType::f64)
    throw std::invalid_argument(
        fmt::format("gradcheck '{}': the output is {}, expected float64", name, out.describe()));
  std::vector<double> w(out.numel());
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

  // ---- numeric gradient by central differences
  for (size_t i = 0; i < inputs.size() && result.passed; ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
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
          analytic[i][e], numeric,
          fmt::format("{} element {} (flat {})", input_label(x, i), index_str(x.shape(), e), e));
    };
    if (n <= opt.full_max_numel) {
      for (int64_t e = 0; e < n && result.passed; ++e) element_check(e);
    } else {
      std::uniform_int_distribution<int64_t> pick(0, n - 1);
      for (int64_t s = 0; s < opt.sampled_elements && result.passed; ++s) element_check(pick(rng));
      std::vector<double> saved(p, p + n), v(n);
      for (int d = 0; d < opt.directions && result.passed; ++d) {
        double analytic_dir = 0;
        for (int64_t e = 0; e < n; ++e) {
          v[e] = normal(rng);
          analytic_dir += analytic[i][e] * v[e];
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
  }

  // ---- full Jacobian for small cases
  const int64_t m = out.numel();
  for (size_t i = 0; i < inputs.size() && result.passed; ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad() || m * x.numel() > opt.jacobian_max_entries) continue;
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
    for (int64_t o = 0; o < m && result.passed; ++o) {
      for (const Tensor& t : inputs)
        if (t.defined()) t.impl()->grad = Tensor();
      Tensor y = fn(inputs);
      Tensor onehot = Tensor::zeros(y.shape(), DType::f64);
      onehot.data<double>()[o] = 1.0;
      backward(y, onehot);
      Tensor g = x.grad();
      std::vector<double> row = g.defined() ? g.to_vector() : std::vector<double>(n, 0.0);
      for (int64_t e = 0; e < n && result.passed; ++e)
        check.compare(row[e], numeric[o * n + e],
                      fmt::format("Jacobian d output{} / d {} element {}", index_str(y.shape(), o),
                                  input_label(x, i), index_str(x.shape(), e)));
    }
    for (const Tensor& t : inputs)
      if (t.defined()) t.impl()->grad = Tensor();
  }
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

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto family : {elementwise_op_cases, activation_op_cases, reduce_op_cases, shape_op_cases,
                      index_op_cases, matmul_op_cases, embedding_op_cases, softmax_op_cases,
                      loss_op_cases, norm_op_cases, attention_op_cases, dropout_op_cases}) {
    std::vector<OpCase> rows = family();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
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
    Tensor copy = t.dtype() == dtype ? t.clone() : detach(t).to(dtype);  // a new leaf
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

}  // namespace dg
