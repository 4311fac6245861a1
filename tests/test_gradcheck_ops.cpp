// The op gradient-check suite: every row of all_op_cases() (one table, assembled from each op
// family's rows) must pass gradcheck and the float32-vs-float64 forward comparison. The rows live
// beside their ops, at the end of each autograd/ops_<family>.cpp (<family>_op_cases()).
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using namespace dg;

TEST_CASE("every op passes gradcheck and float32/float64 agreement") {
  std::vector<OpCase> cases = all_op_cases();
  size_t rows = 0;
  for (const OpCaseFamily& family : op_case_families()) {
    CAPTURE(family.name);
    const size_t n = family.cases().size();
    CHECK(n > 0);  // a family in the table has rows
    rows += n;
  }
  REQUIRE(cases.size() == rows);
  for (const OpCase& c : cases) {
    CAPTURE(c.name);
    OpCaseResult r = run_op_case(c);
    INFO(r.grad.message);
    CHECK(r.grad.passed);
    CHECK(r.grad.checks > 0);
    INFO(r.f32_message);
    CHECK(r.f32_passed);
    INFO(r.f32_grad_message);
    CHECK(r.f32_grad_passed);
  }
}

namespace {
std::string read_source(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

// The guard that a new op family cannot be forgotten: every autograd/ops_<name>.cpp defines
// <name>_op_cases() and has the row FAMILY(<name>) in op_case_families(), unless it is
// listed here as recording no op (then it must not call record(), directly or through the
// pointwise helpers). Every family in the table has its file, and every *_op_cases() defined in an
// op file is in the table. A file that only composes other ops (ops_resize.cpp) still needs rows:
// its compositions are what the rows check.
TEST_CASE("every op file with a differentiable op has its family in op_case_families()") {
  const std::map<std::string, std::string> no_gradient = {
      {"random", "randperm and multinomial: integer samples, never recorded"},
      {"compare", "comparisons, logical and bitwise ops: bool or integer, never recorded"},
  };
  std::set<std::string> in_table;
  for (const OpCaseFamily& family : op_case_families()) {
    CAPTURE(family.name);
    CHECK(in_table.insert(family.name).second);  // listed once
  }
  const std::filesystem::path folder = std::filesystem::path(DG_SOURCE_DIR) / "autograd";
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with("ops_") || !file.ends_with(".cpp")) continue;
    const std::string name = file.substr(4, file.size() - 8);
    files.insert(name);
    const std::string text = read_source(entry.path());
    CAPTURE(file);
    if (no_gradient.count(name)) {
      CHECK(text.find("record(") == std::string::npos);
      CHECK(text.find("unary_pointwise(") == std::string::npos);
      CHECK(in_table.count(name) == 0);
      continue;
    }
    CHECK_MESSAGE(
        text.find("std::vector<OpCase> " + name + "_op_cases() {") != std::string::npos,
        std::string("autograd/" + file + " defines no " + name +
                    "_op_cases(): its ops need gradient-check rows (autograd/gradcheck.h)"));
    CHECK_MESSAGE(
        in_table.count(name) == 1,
        std::string("no family '" + name +
                    "' in op_case_families() (autograd/gradcheck.cpp): its rows never run"));
    // any other family's rows defined here must be in the table too
    for (size_t at = text.find("_op_cases() {"); at != std::string::npos;
         at = text.find("_op_cases() {", at + 1)) {
      const size_t start = text.rfind(' ', at) + 1;
      const std::string defined = text.substr(start, at - start);
      CAPTURE(defined);
      CHECK_MESSAGE(
          in_table.count(defined) == 1,
          std::string(defined +
                      "_op_cases() is not in op_case_families(): its rows are never run"));
    }
  }
  CHECK(files.size() > 20);  // the folder was read
  for (const std::string& name : in_table) {
    CAPTURE(name);
    CHECK_MESSAGE(files.count(name) == 1,
                  std::string("family '" + name + "' has no autograd/ops_" + name + ".cpp"));
  }
}

namespace {
// An op that multiplies its input by 3 and whose backward is wrong by `error` (relative) in
// element `bad` of the gradient (every element when bad < 0): the suite must reject it.
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
      for (int64_t i = 0; i < a.numel(); ++i)
        ga.data<double>()[i] = 3.0 * gv[i] * (bad < 0 || i == bad ? 1.0 + error : 1.0);
      accumulate_grad(a, ga);
    });
  return out;
}
}  // namespace

TEST_CASE("gradcheck has teeth: a backward wrong by 1% in one element is rejected") {
  auto wrong_at = [](int64_t bad) {
    return [bad](const std::vector<Tensor>& in) { return wrong_triple(in[0], bad, 0.01); };
  };
  auto right = [](const std::vector<Tensor>& in) { return wrong_triple(in[0], 0, 0.0); };
  const Shape shape{6, 7};  // 42 elements
  const int64_t n = shape_numel(shape);
  // Each of gradcheck's three comparisons on its own (the others switched off), so that a path
  // that stopped comparing would let the wrong backward through and fail this test.
  GradcheckOptions full;  // every element by central differences (n <= full_max_numel)
  full.jacobian_max_entries = 0;
  GradcheckOptions jacobian;  // only the full Jacobian: no element checks (n > full_max_numel)
  jacobian.full_max_numel = 1;
  jacobian.sampled_elements = 0;
  jacobian.directions = 0;
  GradcheckOptions sampled;  // only sampled elements: 40 draws per element miss one with p = e^-40
  sampled.full_max_numel = 1;
  sampled.sampled_elements = 40 * n;
  sampled.directions = 0;
  sampled.jacobian_max_entries = 0;
  GradcheckOptions directions;  // only random directions: a 1% error in one of 42 terms shows
  directions.full_max_numel = 1;
  directions.sampled_elements = 0;
  directions.jacobian_max_entries = 0;
  const std::pair<const char*, GradcheckOptions> paths[] = {{"element", full},
                                                            {"Jacobian", jacobian},
                                                            {"element", sampled},
                                                            {"random direction", directions}};
  for (const auto& path : paths) {
    const char* what = path.first;  // a variable, not a structured binding: clang 14 captures it
    const GradcheckOptions& opt = path.second;
    CAPTURE(what);
    for (int64_t bad : {int64_t(0), int64_t(7), n - 1}) {
      CAPTURE(bad);
      Tensor x = random_tensor(shape, 9);
      GradcheckResult r = gradcheck("wrong_triple", wrong_at(bad), {x}, opt);
      CHECK_FALSE(r.passed);
      CHECK(r.checks > 0);
      CHECK(r.message.find("wrong_triple") != std::string::npos);
      CHECK(r.message.find("input 0") != std::string::npos);
      CHECK(r.message.find(what) != std::string::npos);
      // the correct backward passes with the same options
      GradcheckResult ok = gradcheck("right_triple", right, {x}, opt);
      CHECK(ok.passed);
      CHECK(ok.checks > 0);
    }
  }
  // With the default options a large input takes the sampled path (elements, then directions):
  // a backward wrong by 1% everywhere is caught there, and the right one passes.
  Tensor big = random_tensor({70, 80}, 9);
  REQUIRE(big.numel() > GradcheckOptions{}.full_max_numel);
  GradcheckResult r = gradcheck("wrong_triple", wrong_at(-1), {big});
  CHECK_FALSE(r.passed);
  CHECK(r.message.find("element") != std::string::npos);
  CHECK(gradcheck("right_triple", right, {big}).passed);
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
  CHECK_THROWS_WITH(record("no_backward_op", {x}, y, BackwardFn()),
                    doctest::Contains("no_backward_op"));
}

TEST_CASE("a backward that produces a wrongly shaped gradient is caught, naming the op") {
  Tensor x = random_tensor({2, 3}, 1);
  Tensor y = Tensor::zeros({2, 3}, DType::f64);
  record("bad_shape_op", {x}, y, [x](const Tensor&) {
    x.impl()->grad = Tensor::zeros({3, 2}, DType::f64);
  });
  CHECK_THROWS_WITH(backward(y, Tensor::ones({2, 3}, DType::f64)),
                    doctest::Contains("bad_shape_op"));
}

namespace {
// x * 3 whose backward is wrong by 1% in element `bad` only when it runs in float32 (as a SIMD
// path or a float accumulator could be): the float64 gradcheck cannot see it.
Tensor triple_wrong_in_f32(const Tensor& a, int64_t bad) {
  Tensor out;
  {
    NoGradGuard g;
    out = scale(a, 3.0);
  }
  if (should_record({a}))
    record("triple_wrong_in_f32", {a}, out, [a, bad](const Tensor& g) {
      std::vector<double> gv = g.contiguous().to_vector();
      for (int64_t i = 0; i < a.numel(); ++i)
        gv[i] *= 3.0 * (i == bad && a.dtype() == DType::f32 ? 1.01 : 1.0);
      accumulate_grad(a, Tensor::from_vector(gv, a.shape(), a.dtype()));
    });
  return out;
}
}  // namespace

TEST_CASE("the op table's float32 backward check catches a 1% error that only float32 makes") {
  for (int64_t bad : {int64_t(0), int64_t(11), int64_t(19)}) {
    CAPTURE(bad);
    OpCase row{"triple_wrong_in_f32",
               [] {
                 return std::vector<Tensor>{random_tensor({4, 5}, 3)};
               },
               [bad](const std::vector<Tensor>& in) { return triple_wrong_in_f32(in[0], bad); }};
    OpCaseResult r = run_op_case(row);
    CHECK(r.grad.passed);            // float64 is right, so the float64 gradcheck passes...
    CHECK(r.f32_passed);             // ...and the forward agrees...
    CHECK_FALSE(r.f32_grad_passed);  // ...but the float32 backward does not
    CHECK(r.f32_grad_message.find("triple_wrong_in_f32") != std::string::npos);
    CHECK(r.f32_grad_message.find(fmt::format("[{}, {}]", bad / 5, bad % 5)) != std::string::npos);
  }
  OpCase right{"triple",
               [] {
                 return std::vector<Tensor>{random_tensor({4, 5}, 3)};
               },
               [](const std::vector<Tensor>& in) { return triple_wrong_in_f32(in[0], -1); }};
  CHECK(run_op_case(right).f32_grad_passed);
}
