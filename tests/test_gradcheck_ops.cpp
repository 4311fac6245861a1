// The op gradient-check suite: every row of all_op_cases() (one table, assembled from each op
// family's rows) must pass gradcheck and the float32-vs-float64 forward comparison.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace dg;

TEST_CASE("every op passes gradcheck and float32/float64 agreement") {
  std::vector<OpCase> cases = all_op_cases();
  REQUIRE(cases.size() >= 18);
  for (const OpCase& c : cases) {
    CAPTURE(c.name);
    OpCaseResult r = run_op_case(c);
    INFO(r.grad.message);
    CHECK(r.grad.passed);
    CHECK(r.grad.checks > 0);
    INFO(r.f32_message);
    CHECK(r.f32_passed);
  }
}

namespace {
// An op that multiplies its input by 3 and whose backward is wrong by `error` (relative) in
// element `bad` of the gradient: the suite must reject it.
Tensor wrong_triple(const Tensor& a, int64_t bad, double error) {
  Tensor out = scale(a, 1.0);
  {
    NoGradGuard g;
    out = scale(a, 3.0);
  }
  if (should_record({a}))
    record("wrong_triple", {a}, out, [a, bad, error](const Tensor& g) {
      Tensor ga = Tensor::zeros(a.shape(), a.dtype());
      std::vector<double> gv = g.contiguous().to_vector();
      for (int64_t i = 0; i < a.numel(); ++i) ga.data<double>()[i] = 3.0 * gv[i] * (i == bad ? 1.0 + error : 1.0);
      accumulate_grad(a, ga);
    });
  return out;
}
}  // namespace

TEST_CASE("gradcheck has teeth: a backward wrong by 1% in one element is rejected") {
  for (Shape shape : {Shape{4, 5}, Shape{70, 80}}) {  // full check, and sampled+directions path
    for (int64_t bad : {int64_t(0), int64_t(7), shape_numel(shape) - 1}) {
      CAPTURE(bad);
      Tensor x = random_tensor(shape, 9);
      GradcheckOptions opt;
      opt.sampled_elements = shape_numel(shape);  // sampled path still reaches every element in expectation
      auto fn = [bad](const std::vector<Tensor>& in) { return wrong_triple(in[0], bad, 0.01); };
      if (shape_numel(shape) <= opt.full_max_numel) {
        GradcheckResult r = gradcheck("wrong_triple", fn, {x}, opt);
        CHECK_FALSE(r.passed);
        CHECK(r.message.find("wrong_triple") != std::string::npos);
        CHECK(r.message.find("input 0") != std::string::npos);
      }
      // the correct version passes with the same options
      auto ok = [](const std::vector<Tensor>& in) { return wrong_triple(in[0], 0, 0.0); };
      CHECK(gradcheck("right_triple", ok, {x}, opt).passed);
    }
  }
}

TEST_CASE("gradcheck names the failing element") {
  Tensor x = random_tensor({2, 3}, 4);
  auto fn = [](const std::vector<Tensor>& in) { return wrong_triple(in[0], 4, 0.01); };
  GradcheckResult r = gradcheck("wrong_triple", fn, {x});
  REQUIRE_FALSE(r.passed);
  CHECK(r.message.find("[1, 1]") != std::string::npos);  // flat 4 of [2, 3]
  CHECK(r.message.find("expected") != std::string::npos);
  CHECK(r.message.find("received") != std::string::npos);
}

TEST_CASE("an op without a backward cannot be recorded") {
  Tensor x = random_tensor({2}, 1);
  Tensor y = Tensor::zeros({2}, DType::f64);
  CHECK_THROWS_WITH(record("no_backward_op", {x}, y, BackwardFn()), doctest::Contains("no_backward_op"));
}

TEST_CASE("a backward that produces a wrongly shaped gradient is caught, naming the op") {
  Tensor x = random_tensor({2, 3}, 1);
  Tensor y = Tensor::zeros({2, 3}, DType::f64);
  record("bad_shape_op", {x}, y, [x](const Tensor&) { x.impl()->grad = Tensor::zeros({3, 2}, DType::f64); });
  CHECK_THROWS_WITH(backward(y, Tensor::ones({2, 3}, DType::f64)), doctest::Contains("bad_shape_op"));
  clear_tape();
}
