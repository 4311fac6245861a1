// Chapter 5 of the learner's path: matmul and linear (autograd/learn-05-matmul-linear.md).
// Grades linear_backward (linear's backward as GEMMs, shared by linear, linear_add and
// linear_rope) and matmul_backward_recorded (matmul's backward as recorded matmuls, for
// create_graph) through the public ops that call them: gradient checks at float64 (2-D, 3-D,
// transposed and broadcast operands), values against PyTorch 1.13's
// (tools/learn/goldens_ch05.py printed them) and a tiny linear regression that must learn.
// It does not grade the GEMM kernels (tensor/gemm_kernels.h): they are not exercises.
#include <fmt/core.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "tools/learn/checks/patterns.h"
#include "tools/learn/grade.h"

namespace dg::learn {
namespace {

// ---- PyTorch 1.13's values (tools/learn/goldens_ch05.py) ------------------------------------
const std::vector<double> k_linear_dx = {
    1.75,  -0.875,  1.375,  -1.25, -0.75, 3.0,  -0.5625, 3.1875,  0.875, -2.75,   0.9375, -2.6875,
    1.125, -0.9375, 1.0625, -1.0,  0.0,   -0.5, -0.1875, -0.6875, 0.25,  -2.8125, 0.625,  -2.4375};
const std::vector<double> k_linear_dw = {
    3.9375, -1.25,   2.0625, -1.0,   -0.0625, -1.1875, -2.3125, -1.3125, -3.375, 3.0,
    0.875,  -2.3125, -0.5,   1.6875, -1.4375, 2.875,   3.75,    -1.6875, 2.4375, -0.875};
const std::vector<double> k_linear_db = {-0.75, -1.75, 0.0, 1.75, 0.75};
const std::vector<double> k_linear_transposed_dx = {2.9375,  -2.0625, -2.1875, 2.5625,
                                                    -1.4375, 1.0625,  1.9375,  -1.25,
                                                    -1.6875, 2.125,   -2.1875, -1.625};
const std::vector<double> k_linear_transposed_dw_stored = {
    2.4375, 1.0,    -1.8125, -1.1875, 1.5, 1.5,  -0.5625, -0.5625, -0.5625, 1.5,
    0.5625, -2.125, 0.6875,  0.0625,  1.5, -2.5, -0.5,    -1.25,   2.8125,  -2.75};
const std::vector<double> k_matmul_da = {
    2.5625,  2.5,     -1.625,  -1.6875, 1.75, 1.875, 2.0,    2.125,  -1.125, -1.5, 2.1875, 1.8125,
    -1.3125, -1.0625, -4.0625, -3.8125, 2.0,  1.75,  2.3125, 2.0625, 2.5625, 2.5,  -1.625, -1.6875};
const std::vector<double> k_matmul_db = {0.8125,  -0.4375, 3.625,  -1.8125, -4.1875, 1.0625,
                                         -3.5,    -2.4375, -0.5,   0.3125,  1.9375,  -1.4375,
                                         1.1875,  -3.1875, 1.5,    4.625,   -0.4375, -0.3125,
                                         -1.8125, 2.375,   1.0625, 0.8125,  -2.4375, 1.375};
const std::vector<double> k_matmul_second_a = {
    2.75, -1.5,  -1.375, -0.375, 1.875, 2.5,   2.25,  -1.5, -1.75, -4.5, -3.75,  -1.25,
    -1.0, 2.875, 2.375,  1.875,  0.875, 1.375, 1.875, -2.0, 2.75,  -1.5, -1.375, -0.375};
const std::vector<double> k_matmul_second_b = {
    5.375, 1.5,   -0.75, 2.0,   4.375, -2.0,   -1.75, 1.875,  -2.75, -3.875, -2.125, 3.375,
    1.875, -1.75, -2.0,  4.375, 1.5,   -2.375, 2.0,   -2.125, -2.0,  2.625,  1.875,  -2.75};

// Fits y = X·w_trueᵀ + b_true (64 rows of 3 features, float32) with linear and mse_loss by plain
// gradient descent (lr 0.1) for `steps` steps; returns the first and the last loss.
std::pair<double, double> fit_linear_regression(int steps) {
  const Tensor X = random_tensor({64, 3}, 51, -1, 1, /*requires_grad=*/false).to(DType::f32);
  const Tensor w_true = Tensor::from_vector({0.5, -1.5, 2.0}, {1, 3}, DType::f32);
  const Tensor b_true = Tensor::from_vector({0.75}, {1}, DType::f32);
  const Tensor target = linear(X, w_true, b_true);  // [64, 1]
  Tensor W = Tensor::zeros({1, 3}, DType::f32).set_requires_grad(true);
  Tensor b = Tensor::zeros({1}, DType::f32).set_requires_grad(true);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    const Tensor loss = mse_loss(linear(X, W, b), target);
    last = loss.item();
    if (step == 0) first = last;
    backward(loss);
    for (Tensor* p : {&W, &b}) {
      float* value = p->data<float>();
      const Tensor g = p->grad();
      if (!g.defined())
        throw std::runtime_error(fmt::format("step {}: backward left the {} without a gradient",
                                             step, p == &W ? "weight [1, 3]" : "bias [1]"));
      for (int64_t i = 0; i < p->numel(); ++i) value[i] -= 0.1f * g.data<float>()[i];
      p->zero_grad();
    }
  }
  return {first, last};
}

// d/dinput sum(linear(x, W, b) ⊙ G) for each input, against PyTorch's.
Verdict linear_values() {
  Tensor x = pattern({2, 3, 4}, 5, 17, 8, 4.0, true);
  Tensor w = pattern({5, 4}, 7, 13, 6, 4.0, true);
  Tensor b = pattern({5}, 3, 7, 3, 2.0, true);
  const Tensor y = linear(x, w, b);
  const std::vector<Tensor> g = grad({y}, {x, w, b}, {weights_for(y)});
  return both(both(expect_values(g[0], k_linear_dx, {2, 3, 4}, 1e-12, 1e-12, "dx = dy·W"),
                   expect_values(g[1], k_linear_dw, {5, 4}, 1e-12, 1e-12, "dW = dyᵀ·x")),
              expect_values(g[2], k_linear_db, {5}, 1e-12, 1e-12, "db = Σ_rows dy"));
}

// The same with W a transposed view of a stored [4, 5] tensor (read by the GEMM as transposed).
Verdict linear_transposed_values() {
  Tensor x = pattern({3, 4}, 5, 17, 8, 4.0, true);
  Tensor stored = pattern({4, 5}, 7, 13, 6, 4.0, true);
  const Tensor y = linear(x, transpose(stored, 0, 1));
  const std::vector<Tensor> g = grad({y}, {x, stored}, {weights_for(y)});
  return both(
      expect_values(g[0], k_linear_transposed_dx, {3, 4}, 1e-12, 1e-12, "dx (W a transposed view)"),
      expect_values(g[1], k_linear_transposed_dw_stored, {4, 5}, 1e-12, 1e-12,
                    "d/d stored, W = storedᵀ"));
}

Exercise linear_backward_exercise() {
  using V = const std::vector<Tensor>&;
  auto lin = [](Shape sx, int64_t out, bool with_bias) {
    std::vector<Tensor> in{random_tensor(sx, 52).set_name("x"),
                           random_tensor({out, sx.back()}, 53).set_name("W")};
    if (with_bias) in.push_back(random_tensor({out}, 54).set_name("bias"));
    return in;
  };
  return {
      "linear_backward",
      "autograd/ops_matmul.cpp",
      {
          {"gradcheck linear: float64 x [4, 3], W [5, 3], bias [5]",
           [=] {
             return gradient_check(
                 "linear/bias", [](V in) { return linear(in[0], in[1], in[2]); },
                 lin({4, 3}, 5, true));
           }},
          {"gradcheck linear: float64 x [2, 3, 4] (3-D), W [5, 4], no bias; and W a transposed "
           "view",
           [=] {
             const Verdict v = gradient_check(
                 "linear/3-D input", [](V in) { return linear(in[0], in[1]); },
                 lin({2, 3, 4}, 5, false));
             if (!v.passed) return v;
             return both(v,
                         gradient_check("linear/transposed-view weight",
                                        [](V in) { return linear(in[0], transpose(in[1], 0, 1)); },
                                        {random_tensor({3, 4}, 55).set_name("x"),
                                         random_tensor({4, 2}, 56).set_name("Wt")}));
           }},
          {"gradcheck linear_add (residual + x·Wᵀ + b, the same backward): float64",
           [] {
             return gradient_check("linear_add",
                                   [](V in) { return linear_add(in[0], in[1], in[2], in[3]); },
                                   {random_tensor({2, 3, 5}, 57).set_name("residual"),
                                    random_tensor({2, 3, 4}, 58).set_name("x"),
                                    random_tensor({5, 4}, 59).set_name("W"),
                                    random_tensor({5}, 60).set_name("bias")});
           }},
          // A weight read by two linears (a tied head, the same projection applied twice): its
          // gradient is the sum of both backwards, so the second must add to what the first left
          // (GradSink's beta), not overwrite it.
          {"gradcheck: one W and bias shared by two linears (their gradients add up)",
           [] {
             return gradient_check(
                 "linear/shared weight",
                 [](V in) { return add(linear(in[0], in[2], in[3]), linear(in[1], in[2], in[3])); },
                 {random_tensor({3, 4}, 63).set_name("x1"),
                  random_tensor({3, 4}, 64).set_name("x2"), random_tensor({5, 4}, 65).set_name("W"),
                  random_tensor({5}, 66).set_name("bias")});
           }},
          {"values: dx, dW, db of linear (3-D x) and of a transposed-view W vs PyTorch",
           [] { return both(linear_values(), linear_transposed_values()); }},
          {"training: linear regression (3 features, float32) by gradient descent, MSE below "
           "1e-6 within 300 steps",
           [] {
             const auto [first, last] = fit_linear_regression(300);
             return expect_true(std::isfinite(last) && last < 1e-6,
                                fmt::format("MSE {:.3g} at step 0, {:.3g} after 300 steps (must "
                                            "be below 1e-6)",
                                            first, last));
           }},
      },
  };
}

// a [2, 1, 3, 4] @ b [3, 4, 2]: da, db from grad(create_graph) (the path that runs
// matmul_backward_recorded) and the second derivatives of sum(U_a ⊙ da) + sum(U_b ⊙ db).
Verdict matmul_values(bool second) {
  Tensor a = pattern({2, 1, 3, 4}, 5, 17, 8, 4.0, true);
  Tensor b = pattern({3, 4, 2}, 7, 13, 6, 4.0, true);
  const Tensor y = matmul(a, b);
  const std::vector<Tensor> first =
      grad({y}, {a, b}, {weights_for(y)}, /*keep_graph=*/false, /*create_graph=*/true);
  if (!second) {
    return both(expect_values(first[0], k_matmul_da, {2, 1, 3, 4}, 1e-12, 1e-12,
                              "da = g·bᵀ, summed over b's broadcast axis"),
                expect_values(first[1], k_matmul_db, {3, 4, 2}, 1e-12, 1e-12,
                              "db = aᵀ·g, summed over a's broadcast axis"));
  }
  const std::vector<Tensor> dd =
      grad({first[0], first[1]}, {a, b},
           {pattern({2, 1, 3, 4}, 5, 9, 4, 2.0), pattern({3, 4, 2}, 3, 7, 2, 2.0)});
  return both(
      expect_values(dd[0], k_matmul_second_a, {2, 1, 3, 4}, 1e-12, 1e-12, "second derivative a"),
      expect_values(dd[1], k_matmul_second_b, {3, 4, 2}, 1e-12, 1e-12, "second derivative b"));
}

Exercise matmul_backward_recorded_exercise() {
  using V = const std::vector<Tensor>&;
  auto two = [](Shape sa, Shape sb) {
    return std::vector<Tensor>{random_tensor(sa, 61).set_name("a"),
                               random_tensor(sb, 62).set_name("b")};
  };
  return {
      "matmul_backward_recorded",
      "autograd/ops_matmul.cpp",
      {
          {"values: da, db of a [2, 1, 3, 4] @ b [3, 4, 2] with create_graph vs PyTorch",
           [] { return matmul_values(false); }},
          {"values: second derivatives of the same vs PyTorch", [] { return matmul_values(true); }},
          {"gradgradcheck matmul: float64 square [3, 3] @ [3, 3]",
           [=] {
             return from_gradcheck(gradgradcheck(
                 "matmul/square", [](V in) { return matmul(in[0], in[1]); }, two({3, 3}, {3, 3})));
           }},
          {"gradgradcheck matmul: float64 batched a [2, 3, 4] @ a transposed view [2, 5, 4]ᵀ",
           [=] {
             return from_gradcheck(gradgradcheck(
                 "matmul/batched transposed b",
                 [](V in) { return matmul(in[0], transpose(in[1], -1, -2)); },
                 two({2, 3, 4}, {2, 5, 4})));
           }},
      },
  };
}

}  // namespace

Chapter chapter() {
  return {5,
          "matmul and linear",
          "autograd/learn-05-matmul-linear.md",
          {linear_backward_exercise(), matmul_backward_recorded_exercise()}};
}

}  // namespace dg::learn
