// gradgradcheck and create_graph: second derivatives of the ops against central differences of
// their first derivatives, a Hessian-vector product, and the teeth (a second derivative wrong by
// 1%, with a right first derivative, must fail). The table of rows is run by
// tests/test_gradcheck_ops.cpp's companion case below and by `depthgrad gradcheck`.
#include <doctest/doctest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

using namespace dg;

TEST_CASE("create_graph: d²/dx² of x³ is 6x, and the gradient has a graph") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0}, {3}, DType::f64);
  x.set_requires_grad(true);
  Tensor y = sum(mul(mul(x, x), x));
  std::vector<Tensor> g = grad({y}, {x}, {}, false, /*create_graph=*/true);
  REQUIRE(g[0].requires_grad());
  const std::vector<double> first = g[0].to_vector();
  CHECK(first[0] == doctest::Approx(3 * 0.25));
  CHECK(first[1] == doctest::Approx(3 * 1.5625));
  backward(sum(g[0]));
  const std::vector<double> second = x.grad().to_vector();
  CHECK(second[0] == doctest::Approx(6 * 0.5));
  CHECK(second[1] == doctest::Approx(6 * -1.25));
  CHECK(second[2] == doctest::Approx(6 * 2.0));
}

TEST_CASE("gradgradcheck passes on compositions of ops with a differentiable backward") {
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({4}, 2);
  GradcheckResult r = gradgradcheck(
      "exp(a*b)+a",
      [](const std::vector<Tensor>& in) { return add(exp(mul(in[0], in[1])), in[0]); }, {a, b});
  INFO(r.message);
  CHECK(r.passed);
  CHECK(r.checks > 12 + 4 + 12);
  GradcheckResult s = gradgradcheck(
      "mean(a²)", [](const std::vector<Tensor>& in) { return mean(mul(in[0], in[0]), {1}); }, {a});
  INFO(s.message);
  CHECK(s.passed);
}

namespace {
// exp whose create_graph backward uses a detached output: the first derivative is right, the
// second loses exp's dependence on its input (a real bug class): gradgradcheck must catch it.
Tensor exp_detached_second(const Tensor& a, double error) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = exp(a);
  }
  if (should_record({a}))
    record("exp_detached", {a}, out, [a, out = detach(out)](const Tensor& g) {
      accumulate_grad(a, mul(g, out));
    }).differentiable([a, error](const Tensor& g, const Tensor& out) {
      // right values; the second derivative is off by `error` (relative) through a constant copy
      Tensor frozen = detach(out);
      accumulate_grad(a, add(mul(g, scale(out, 1.0 - error)), mul(g, scale(frozen, error))));
    });
  return out;
}
}  // namespace

TEST_CASE("gradgradcheck has teeth: a 1% error in a second derivative fails, 0% passes") {
  Tensor a = random_tensor({2, 3}, 3);
  auto run = [&](double error) {
    return gradgradcheck(
        "exp_detached",
        [error](const std::vector<Tensor>& in) { return exp_detached_second(in[0], error); }, {a});
  };
  CHECK(run(0.0).passed);
  GradcheckResult bad = run(0.01);
  CHECK_FALSE(bad.passed);
  CHECK(bad.message.find("d²") != std::string::npos);
  CHECK_FALSE(run(1.0).passed);
}

TEST_CASE("create_graph refuses an op without a differentiable backward, naming it") {
  Tensor a = random_tensor({3}, 4);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = scale(a, 2.0);
  }
  record("fused_double", {a}, out, [a](const Tensor& g) { accumulate_grad(a, scale(g, 2.0)); });
  CHECK_THROWS_WITH(grad({sum(out)}, {a}, {}, false, true), doctest::Contains("'fused_double'"));
  // without create_graph the same graph runs
  CHECK(grad({sum(out)}, {a})[0].to_vector()[0] == doctest::Approx(2.0));
}

TEST_CASE("attention differentiates twice through its plain twin (rope, GQA, the causal mask)") {
  // The fused attention ops refuse create_graph, naming themselves; plain_attention, composed of
  // ops that all support it, is the model to differentiate twice.
  const int64_t B = 1, T = 3, D = 4, H = 2, Hkv = 1, hd = 2;
  Tensor u = random_tensor({B, T, D}, 11), wq = random_tensor({H * hd, D}, 12),
         wk = random_tensor({Hkv * hd, D}, 13), wv = random_tensor({Hkv * hd, D}, 14);
  auto fn = [&](const std::vector<Tensor>& in) {
    return plain_attention(in[0], in[0], in[1], Tensor(), in[2], Tensor(), in[3], Tensor(), H, Hkv,
                           /*rope_base=*/100.0);
  };
  GradcheckResult r = gradgradcheck("plain_attention", fn, {u, wq, wk, wv});
  INFO(r.message);
  CHECK(r.passed);
  Tensor q = random_tensor({B, T, H * hd}, 15), k = random_tensor({B, T, Hkv * hd}, 16);
  Tensor y = attention_heads(q, k, k, H, Hkv, 100.0);
  CHECK_THROWS_WITH(grad({sum(y)}, {q}, {}, false, true), doctest::Contains("'attention_heads'"));
}
