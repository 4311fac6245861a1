// Second derivatives of the pointwise families (elementwise, activation, reduce, softmax): every
// gradient-check row of these families passes gradgradcheck; the recorded first derivative keeps
// the kernels' rules at kinks and ties exactly (the rows include the elementary functions and
// cumsum); third derivatives (a derivative of a second one, as physics-informed losses take)
// agree with central differences of the recorded second ones.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <map>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

using namespace dg;

namespace {
// Rows that also run an op of another family: until that op has a differentiable backward, the row
// may be refused, naming it (and then only it).
const std::map<std::string, std::string> kForeignOp = {
    {"min/of a transposed view, keepdim", "transpose"},
};

void check_family(const char* family, const std::vector<OpCase>& cases) {
  REQUIRE(!cases.empty());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> refused;
  for (const OpCase& c : cases) {
    CAPTURE(c.name);
    OpCaseGradgradResult r = run_op_case_gradgrad(c);
    INFO(r.grad.message);
    auto foreign = kForeignOp.find(c.name);
    if (!r.supported && foreign != kForeignOp.end()) {
      CHECK(r.grad.message.find("'" + foreign->second + "'") != std::string::npos);
      refused.push_back(fmt::format("{} (refused by '{}')", c.name, foreign->second));
      continue;
    }
    CHECK(r.supported);
    CHECK(r.grad.passed);
    CHECK(r.grad.checks > 0);
    CHECK(r.seconds < 5.0);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(fmt::format("{}: {} rows, {} refused by another family's op{}{}, {:.2f} s", family,
                      cases.size(), refused.size(), refused.empty() ? "" : ": ",
                      fmt::join(refused, ", "), seconds));
}

Tensor values(const std::vector<double>& v, bool requires_grad = true) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64);
  t.set_requires_grad(requires_grad);
  return t;
}

// Fixed weights [5] (no gradient): keeps Σ softmax from being a constant.
Tensor weights() { return values({0.3, -1.2, 0.8, 2.0, -0.4}, false); }

// The gradient of Σ W ⊙ f(inputs) with respect to each input, plain and under create_graph.
std::vector<std::vector<double>> first_derivative(
    const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& in,
    bool create_graph) {
  Tensor y = f(in);
  std::vector<double> w(static_cast<size_t>(y.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + 0.25 * static_cast<double>(i % 5);
  Tensor loss = sum(mul(y, Tensor::from_vector(w, y.shape(), DType::f64)));
  std::vector<std::vector<double>> out;
  for (const Tensor& g : grad({loss}, in, {}, false, create_graph, /*allow_unused=*/true))
    out.push_back(g.defined() ? g.to_vector() : std::vector<double>{});
  return out;
}
}  // namespace

TEST_CASE("gradgradcheck passes on every arithmetic, unary, activation, reduce and softmax row") {
  check_family("arithmetic", arithmetic_op_cases());
  check_family("unary", unary_op_cases());
  check_family("activation", activation_op_cases());
  check_family("reduce", reduce_op_cases());
  check_family("softmax", softmax_op_cases());
}

TEST_CASE("create_graph keeps the kernels' rules at kinks and ties, value for value") {
  using V = const std::vector<Tensor>&;
  // every kink and tie on the grid: 0 for relu/abs/leaky_relu, clamp's bounds, ties of max/min
  const std::vector<double> x{-1.5, -0.5, 0.0, 0.0, 0.5, 0.5, 1.5, -1.5};
  const std::vector<double> y{-1.5, 0.25, 0.0, 1.0, 0.5, -2.0, 1.5, 3.0};
  const std::vector<std::pair<const char*, std::function<Tensor(V)>>> ops = {
      {"relu", [](V in) { return relu(in[0]); }},
      {"leaky_relu", [](V in) { return leaky_relu(in[0], 0.2); }},
      {"abs", [](V in) { return abs(in[0]); }},
      {"clamp", [](V in) { return clamp(in[0], -0.5, 0.5); }},
      {"pow/0", [](V in) { return pow(in[0], 0.0); }},
      {"softplus/threshold", [](V in) { return softplus(in[0], 2.0, 1.0); }},
      {"maximum", [](V in) { return maximum(in[0], in[1]); }},
      {"minimum", [](V in) { return minimum(in[0], in[1]); }},
      {"pow_tensor/zero base", [](V in) { return pow(abs(in[0]), abs(in[1])); }},
      {"where/both", [](V in) { return where(gt(in[0], 0.0), in[0], in[1]); }},
      {"masked_fill", [](V in) { return masked_fill(in[0], lt(in[1], 0.0), 2.0); }},
      {"max/dim ties",
       [](V in) {
         return max(reshape(in[0], {4, 2}), 1).values;
       }},
      {"min/dim ties",
       [](V in) {
         return min(reshape(in[0], {2, 4}), 0).values;
       }},
      {"max/all ties", [](V in) { return max(in[0]); }},
      {"min/all ties", [](V in) { return min(in[0]); }},
  };
  for (const auto& [op, f] : ops) {
    const std::string name = op;
    CAPTURE(name);
    const std::vector<Tensor> in{values(x), values(y)};
    auto plain = first_derivative(f, in, false);
    auto recorded = first_derivative(f, in, true);
    REQUIRE(plain.size() == recorded.size());
    for (size_t k = 0; k < plain.size(); ++k) CHECK(plain[k] == recorded[k]);
  }
}

TEST_CASE("third derivatives of the pointwise ops agree with differences of the second") {
  using F = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, F>> ops = {
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }},
      {"tanh", [](const Tensor& a) { return tanh(a); }},
      {"softplus", [](const Tensor& a) { return softplus(a, 1.5, 20.0); }},
      {"silu", [](const Tensor& a) { return silu(a); }},
      {"gelu", [](const Tensor& a) { return gelu(a); }},
      {"gelu_tanh", [](const Tensor& a) { return gelu_tanh(a); }},
      {"swiglu", [](const Tensor& a) { return swiglu(a, add_scalar(scale(a, 0.5), 1.0)); }},
      {"exp·log·sqrt",
       [](const Tensor& a) { return log(add_scalar(exp(sqrt(add_scalar(a, 3.0))), 1.0)); }},
      {"pow/2.5", [](const Tensor& a) { return pow(add_scalar(a, 3.0), 2.5); }},
      {"div", [](const Tensor& a) { return div(a, add_scalar(mul(a, a), 1.0)); }},
      {"softmax", [](const Tensor& a) { return mul(softmax(scale(a, 1.3)), weights()); }},
      {"log_softmax", [](const Tensor& a) { return mul(log_softmax(a), weights()); }},
      {"max/all", [](const Tensor& a) { return mul(max(a), sum(mul(a, a))); }},
      {"sin·cos", [](const Tensor& a) { return mul(sin(a), cos(scale(a, 0.7))); }},
      {"erf·square", [](const Tensor& a) { return erf(square(a)); }},
      {"expm1·log1p·rsqrt",
       [](const Tensor& a) { return log1p(expm1(rsqrt(add_scalar(a, 3.0)))); }},
      {"cumsum", [](const Tensor& a) { return mul(cumsum(mul(mul(a, a), a), 0), weights()); }},
  };
  const std::vector<double> x0{-1.7, -0.6, 0.3, 0.9, 1.8};
  // d²/dx² of Σ f(x), i.e. the gradient of Σ ∂/∂x Σ f, recorded twice
  auto second = [](const F& f, const Tensor& x) {
    Tensor g1 = grad({sum(f(x))}, {x}, {}, false, true)[0];
    return grad({sum(g1)}, {x}, {}, false, true)[0];
  };
  for (const auto& entry : ops) {
    const std::string name = entry.first;
    const F& f = entry.second;  // a named reference: lambdas below capture it (C++20 forbids
                                // capturing a structured binding before clang 16)
    CAPTURE(name);
    Tensor x = values(x0);
    Tensor third = grad({sum(second(f, x))}, {x})[0];
    // H(x) = Σ second(x); ∂H/∂x_i by central differences of recorded second derivatives
    const double eps = 1e-5;
    std::vector<double> t = third.to_vector();
    for (size_t i = 0; i < x0.size(); ++i) {
      auto at = [&](double d) {
        std::vector<double> v = x0;
        v[i] += d;
        return sum(second(f, values(v))).item();
      };
      const double numeric = (at(eps) - at(-eps)) / (2 * eps);
      CHECK(t[i] == doctest::Approx(numeric).epsilon(1e-5));
    }
  }
}

TEST_CASE("in-place writes: each op refuses only when a tensor its backward reads changed") {
  // h = 1·x: a non-leaf that may be written in place; `read` says whether op's backward reads it
  auto run = [](const char* op, bool read, const std::function<Tensor(const Tensor&)>& f) {
    CAPTURE(std::string(op));
    Tensor x = values({0.5, -1.0, 2.0, 1.5});
    Tensor h = scale(x, 1.0);
    Tensor loss = sum(f(h));
    h.fill(0.75);
    if (read)
      CHECK_THROWS_WITH(backward(loss), doctest::Contains(fmt::format("'{}'", op).c_str()));
    else
      CHECK_NOTHROW(backward(loss));
  };
  const Tensor c = values({2.0, 3.0, 4.0, 5.0}, false);
  run("sub", false, [&](const Tensor& h) { return sub(c, h); });
  run("add_scalar", false, [](const Tensor& h) { return add_scalar(h, 2.0); });
  run("div", false, [&](const Tensor& h) { return div(h, c); });  // reads b and the output
  run("div", true, [&](const Tensor& h) { return div(c, h); });
  run("log", true, [](const Tensor& h) { return log(h); });
  run("relu", false, [](const Tensor& h) { return relu(h); });  // reads its output only
  run("sigmoid", false, [](const Tensor& h) { return sigmoid(h); });
  run("leaky_relu", true, [](const Tensor& h) { return leaky_relu(h); });
  run("where", false, [&](const Tensor& h) { return where(gt(c, 2.5), h, c); });
  run("softmax", false, [](const Tensor& h) { return softmax(h); });
  run("max", false, [](const Tensor& h) { return max(reshape(h, {2, 2}), 1).values; });
  run("pow_tensor", true, [&](const Tensor& h) { return pow(c, h); });
  // the output (or max's indices) written in place: refused
  Tensor x = values({0.5, -1.0, 2.0, 1.5});
  Tensor y = relu(x), loss = sum(y);
  y.fill(1.0);
  CHECK_THROWS_WITH(backward(loss), doctest::Contains("'relu'"));
  ValuesAndIndices m = max(reshape(x, {2, 2}), 0);
  Tensor loss2 = sum(m.values);
  m.indices.fill(0);
  CHECK_THROWS_WITH(backward(loss2), doctest::Contains("'max'"));
}
