// Chapter 3 of the learner's path (autograd/learn-03-an-op.md): an op end to end. Grades
// mul_backward, div_backward (autograd/ops_arithmetic.cpp) and exp_backward (ops_unary.cpp) through
// the ops that record them: gradient checks at float64 with broadcast inputs, gradients against
// PyTorch 1.13's (tools/learn/goldens_ch03.py printed them), and second derivatives (create_graph),
// which only a backward written with recorded ops on the op's own inputs has. div's and exp's
// checks run mul (their losses are weighted sums made with mul): a wrong mul_backward marks them
// skipped. It does not grade the forwards or the kernels: the chapter reads them.
#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tools/learn/grade.h"

namespace dg::learn {
namespace {

const std::map<std::string, std::vector<double>> kTorch = {
    {"mul.da", {0.9375, 0.0, -0.375, -0.9375, 0.0, -0.5625}},
    {"mul.db", {1.875, 0.0, -0.1875}},
    {"div.da",
     {0.4172077922077922, 0.3821428571428572, -1.852922077922078, 0.3821428571428572,
      -1.852922077922078, 2.0584415584415585}},
    {"div.db", {-2.04, -0.15625, -0.10743801652892558, -0.32653061224489793}},
    {"exp.da",
     {-0.4598493014643029, 0.6420127083438707, -0.23618327637050734, 2.0609015883751605,
      0.15163266492815836, -1.587750012459506}},
    {"exp.dda",
     {0.5748116268303787, 0.32100635417193535, 0.11809163818525367, 2.5761269854689504,
      0.03790816623203959, 1.1908125093446296}},
};

// ((k·mul) mod m − shift) / div + offset for k = 0, 1, ..., float64: goldens_ch03.py's pattern().
Tensor pattern(const Shape& shape, int64_t mul, int64_t mod, double shift, double div,
               double offset = 0.0, bool requires_grad = true) {
  std::vector<double> values(shape_numel(shape));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = (double((int64_t(k) * mul) % mod) - shift) / div + offset;
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  t.set_requires_grad(requires_grad);
  return t;
}

Tensor weighted_loss(const Tensor& y) {
  return sum(mul(y, pattern(y.shape(), 7, 11, 5, 4, 0.0, false)));
}

Verdict torch_gradients(const Tensor& a, const char* a_golden, const Tensor& b,
                        const char* b_golden, const std::string& what) {
  const Verdict va = expect_values(a.grad(), kTorch.at(a_golden), a.shape(), 1e-12, 1e-12,
                                   what + ": a's gradient");
  if (!va.passed || !b.defined()) return va;
  const Verdict vb = expect_values(b.grad(), kTorch.at(b_golden), b.shape(), 1e-12, 1e-12,
                                   what + ": b's gradient");
  return vb.passed ? Verdict{true, what + ": both gradients as torch's"} : vb;
}

GradcheckFn binary(Tensor (*op)(const Tensor&, const Tensor&)) {
  return [op](const std::vector<Tensor>& in) { return op(in[0], in[1]); };
}

// A constant input (a mask, a target, a loss's weights: requires_grad false) gets no gradient, as
// torch leaves its .grad None: a backward that skips the "does this input need one?" test writes a
// gradient into it and spends a product the size of the input on nothing. Both sides are tried.
Verdict constant_gets_no_gradient(Tensor (*op)(const Tensor&, const Tensor&), const char* name) {
  for (int side = 0; side < 2; ++side) {
    const Tensor x = pattern({2, 3}, 5, 9, 4, 4);
    const Tensor c = pattern({3}, 3, 7, 3, 4, 1.5, /*requires_grad=*/false);
    backward(sum(side == 0 ? op(x, c) : op(c, x)));
    const std::string what =
        side == 0 ? fmt::format("{}(x, c)", name) : fmt::format("{}(c, x)", name);
    if (!x.grad().defined())
      return {false, fmt::format("{}: x requires grad but has no gradient", what)};
    if (c.grad().defined())
      return {false, fmt::format("{}: c does not require grad, yet it has a gradient (test "
                                 "requires_grad() before accumulating an input's share)",
                                 what)};
  }
  return {true, fmt::format("{}(x, c) and {}(c, x): only x, which requires grad, has a gradient",
                            name, name)};
}

// ---- mul_backward -----------------------------------------------------------------------------

Verdict mul_torch() {
  const Tensor a = pattern({2, 3}, 5, 9, 4, 4), b = pattern({3}, 3, 7, 3, 4);
  backward(weighted_loss(mul(a, b)));
  return torch_gradients(a, "mul.da", b, "mul.db", "a [2, 3] * b [3]");
}

Verdict mul_gradcheck_broadcast() {
  return gradient_check("mul float64 [3, 4] * [4]", binary(mul),
                        {pattern({3, 4}, 5, 9, 4, 4), pattern({4}, 3, 7, 3, 4)});
}

Verdict mul_gradcheck_both_broadcast() {
  return gradient_check("mul float64 [2, 1, 3] * [4, 1]", binary(mul),
                        {pattern({2, 1, 3}, 5, 9, 4, 4), pattern({4, 1}, 3, 7, 3, 4)});
}

Verdict mul_same_input() {  // x * x: both of mul_backward's contributions reach x
  return gradient_check("mul float64 x * x, x [5]",
                        [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); },
                        {pattern({5}, 3, 7, 3, 4)});
}

// Second derivatives: the backward must be written with recorded ops on a and b themselves. One
// built from detach(a) and detach(b) gives the right first derivative, but its result does not
// depend on a or b in the graph, so d/da of it misses terms: d²/dx² of x·x·x comes out 0 or 2x
// instead of 6x.
Verdict mul_second_derivative() {
  return from_gradcheck(gradgradcheck("mul float64 [2, 3] * [3], second derivatives", binary(mul),
                                      {pattern({2, 3}, 5, 9, 4, 4), pattern({3}, 3, 7, 3, 4)}));
}

Verdict mul_cube_second_derivative() {
  const Tensor x = pattern({5}, 3, 7, 3, 4);
  const Tensor first = grad({sum(mul(mul(x, x), x))}, {x}, {}, false, true)[0];  // 3x²
  if (!first.requires_grad())
    return {false,
            "d/dx sum(x·x·x) under create_graph has no graph: the backward must multiply g by a "
            "and b with mul itself, not by detach(a), detach(b) and not in a kernel"};
  const Tensor second = grad({sum(first)}, {x})[0];  // 6x
  std::vector<double> expected = x.to_vector();
  for (double& v : expected) v *= 6;
  return expect_values(second, expected, x.shape(), 1e-12, 1e-12,
                       "d²/dx² sum(x·x·x) = 6x through create_graph");
}

// ---- div_backward -----------------------------------------------------------------------------

Verdict div_torch() {
  const Tensor a = pattern({2, 1, 3}, 5, 9, 4, 4), b = pattern({4, 1}, 3, 7, 3, 4, 2.0);
  backward(weighted_loss(div(a, b)));
  return torch_gradients(a, "div.da", b, "div.db", "a [2, 1, 3] / b [4, 1]");
}

Verdict div_gradcheck() {
  return gradient_check("div float64 [2, 1, 3] / [4, 1]", binary(div),
                        {pattern({2, 1, 3}, 5, 9, 4, 4), pattern({4, 1}, 3, 7, 3, 4, 2.0)});
}

Verdict div_gradcheck_scalar_like() {
  return gradient_check("div float64 [3, 4] / [1]", binary(div),
                        {pattern({3, 4}, 5, 9, 4, 4), pattern({1}, 1, 3, 0, 1, -1.5)});
}

Verdict div_second_derivative() {
  return from_gradcheck(
      gradgradcheck("div float64 [2, 3] / [3], second derivatives", binary(div),
                    {pattern({2, 3}, 5, 9, 4, 4), pattern({3}, 3, 7, 3, 4, 2.0)}));
}

// ---- exp_backward -----------------------------------------------------------------------------

Verdict exp_torch() {
  const Tensor a = pattern({2, 3}, 5, 9, 4, 4);
  backward(weighted_loss(exp(a)));
  return torch_gradients(a, "exp.da", Tensor(), "", "exp(a), a [2, 3]");
}

Verdict exp_gradcheck() {
  return gradient_check("exp float64 [3, 4]",
                        [](const std::vector<Tensor>& in) { return exp(in[0]); },
                        {pattern({3, 4}, 5, 9, 4, 4)});
}

// d/da of sum(G * dL/da) with dL/da from create_graph: the backward itself must be recorded, and
// read exp's output with its graph (a detached output has no second derivative).
Verdict exp_second_derivative() {
  const Tensor a = pattern({2, 3}, 5, 9, 4, 4);
  const std::vector<Tensor> first = grad({weighted_loss(exp(a))}, {a}, {}, false, true);
  const Verdict v1 = expect_values(first[0], kTorch.at("exp.da"), a.shape(), 1e-12, 1e-12,
                                   "dL/da under create_graph");
  if (!v1.passed) return v1;
  if (!first[0].requires_grad())
    return {false,
            "dL/da under create_graph has no graph: the backward must multiply by out itself "
            "with a recorded op (mul), not by detach(out) and not in a kernel"};
  backward(weighted_loss(first[0]));
  return expect_values(a.grad(), kTorch.at("exp.dda"), a.shape(), 1e-12, 1e-12,
                       "the second derivative, as torch's autograd.grad(create_graph=True)");
}

}  // namespace

Chapter chapter() {
  return {
      3,
      "an op end to end",
      "autograd/learn-03-an-op.md",
      {
          {"mul_backward",
           "autograd/ops_arithmetic.cpp",
           {{"a [2, 3] * b [3]: gradients as torch's", mul_torch},
            {"gradcheck float64: [3, 4] * [4] (broadcast)", mul_gradcheck_broadcast},
            {"gradcheck float64: [2, 1, 3] * [4, 1] (both broadcast)",
             mul_gradcheck_both_broadcast},
            {"gradcheck float64: x * x (one tensor, both inputs)", mul_same_input},
            {"gradgradcheck float64: second derivatives of [2, 3] * [3]", mul_second_derivative},
            {"d²/dx² of x·x·x is 6x (create_graph)", mul_cube_second_derivative},
            {"a constant factor gets no gradient",
             [] { return constant_gets_no_gradient(mul, "mul"); }}}},
          {"div_backward",
           "autograd/ops_arithmetic.cpp",
           {{"a [2, 1, 3] / b [4, 1]: gradients as torch's", div_torch},
            {"gradcheck float64: [2, 1, 3] / [4, 1]", div_gradcheck, true},
            {"gradcheck float64: [3, 4] / [1]", div_gradcheck_scalar_like, true},
            {"gradgradcheck float64: second derivatives of [2, 3] / [3]", div_second_derivative},
            {"a constant numerator or denominator gets no gradient",
             [] { return constant_gets_no_gradient(div, "div"); }, true}},
           {"mul_backward"}},
          {"exp_backward",
           "autograd/ops_unary.cpp",
           {{"exp(a), a [2, 3]: gradient as torch's", exp_torch},
            {"gradcheck float64: exp of [3, 4]", exp_gradcheck, true},
            {"second derivative through create_graph, as torch's", exp_second_derivative}},
           {"mul_backward"}},
      }};
}

}  // namespace dg::learn
