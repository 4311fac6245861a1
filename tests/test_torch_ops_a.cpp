// Tests of pad, flip, roll, tril, triu (autograd/ops_pad.cpp), sort, argsort, topk
// (autograd/ops_sort.cpp), var, std, var_mean, std_mean (autograd/ops_reduce.cpp) and one_hot
// (autograd/ops_embedding.cpp) against PyTorch 1.13: forward values and the gradients of a
// random-weighted loss sum(y ⊙ W) in float64 (1e-12) and float32 (1e-6), indices, the tie order,
// NaN, the dtypes of results, the ops' refusals, and second derivatives of every row of the sort
// and pad families. Finite differences: those rows in the gradient-check table. The goldens
// come from tools/torch_goldens_ops_a.py (offline; tests/torch_ops_a_goldens.h).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"
#include "tests/torch_ops_a_goldens.h"

using namespace dg;
using namespace dg::test;

namespace {

const std::vector<double>& golden(const std::string& name) {
  INFO("golden ", name);
  REQUIRE(kOpsAGoldens.count(name) == 1);
  return kOpsAGoldens.at(name);
}

int64_t numel_of(const Shape& s) { return shape_numel(s); }

// The generator's inputs: distinct values (no ties) or a spread with repeats.
Tensor distinct(const Shape& s, DType d) {
  return Tensor::from_vector(pattern(numel_of(s), 7, 31, 15, 8.0), s, d).set_requires_grad(true);
}
Tensor spread(const Shape& s, DType d) {
  return Tensor::from_vector(pattern(numel_of(s), 5, 11, 5, 4.0), s, d).set_requires_grad(true);
}
Tensor weights_like(const Tensor& y) {
  std::vector<double> w = pattern(y.numel(), 3, 7, 3, 4.0);
  for (double& v : w) v += 0.1;
  return Tensor::from_vector(w, y.shape(), y.dtype());
}

using Fn = std::function<Tensor(const Tensor&)>;

// y = fn(x) and d sum(y ⊙ W)/dx against the goldens `name`.y and `name`.dx, in float64 and float32.
void check_case(const std::string& name, const Shape& shape, bool distinct_values, const Fn& fn) {
  for (DType d : {DType::f64, DType::f32}) {
    CAPTURE(name);
    CAPTURE(dtype_name(d));
    const double tolerance = d == DType::f64 ? 1e-12 : 1e-6;
    Tensor x = distinct_values ? distinct(shape, d) : spread(shape, d);
    Tensor y = fn(x);
    CHECK(y.dtype() == d);
    check_close(y.to_vector(), golden(name + ".y"), tolerance);
    backward(y, weights_like(y));
    REQUIRE(x.grad().defined());
    check_close(x.grad().to_vector(), golden(name + ".dx"), tolerance);
  }
}

void check_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const std::string e = error_of(fn);
  CAPTURE(e);
  CHECK(!e.empty());
  for (const std::string& p : parts) CHECK(contains(e, p));
}

std::vector<double> ints(const Tensor& t) { return t.to_vector(); }

}  // namespace

TEST_CASE("pad: constant, reflect and replicate against torch 1.13") {
  check_case("pad.constant", {2, 3, 4}, false, [](const Tensor& x) {
    return pad(x, {1, 2, 1, 0}, PadMode::constant, 0.5);
  });
  check_case("pad.crop", {2, 3, 4}, false, [](const Tensor& x) { return pad(x, {-1, 2, 1, -1}); });
  check_case("pad.reflect1", {2, 3, 5}, false, [](const Tensor& x) {
    return pad(x, {2, 3}, PadMode::reflect);
  });
  check_case("pad.reflect2", {1, 2, 4, 5}, false, [](const Tensor& x) {
    return pad(x, {1, 2, 3, 1}, PadMode::reflect);
  });
  check_case("pad.reflect3", {1, 2, 3, 3, 4}, false, [](const Tensor& x) {
    return pad(x, {1, 3, 2, 0, 1, 2}, PadMode::reflect);
  });
  check_case("pad.reflect_neg", {2, 6}, false, [](const Tensor& x) {
    return pad(x, {-2, 4}, PadMode::reflect);
  });
  check_case("pad.replicate1", {3, 4}, false, [](const Tensor& x) {
    return pad(x, {3, 1}, PadMode::replicate);
  });
  check_case("pad.replicate2", {2, 3, 4}, false, [](const Tensor& x) {
    return pad(x, {2, 1, 0, 3}, PadMode::replicate);
  });
  check_case("pad.replicate3", {1, 1, 2, 3, 3}, false, [](const Tensor& x) {
    return pad(x, {1, 0, 2, 1, 1, 2}, PadMode::replicate);
  });
  check_case("pad.circular", {2, 1, 3, 4}, false, [](const Tensor& x) {
    return pad(x, {3, -1, 2, 3}, PadMode::circular);
  });
}

TEST_CASE("pad: shapes, integer tensors and torch's rules") {
  CHECK(pad(Tensor::zeros({2, 3, 4}), {1, 1, 1, 1, 1, 1}).shape() == Shape{4, 5, 6});
  CHECK(pad(Tensor::zeros({1, 2, 3}), {-3, 0}).shape() == Shape{1, 2, 0});  // cropped to nothing
  CHECK(pad(Tensor::zeros({1, 2, 3}), {}).shape() == Shape{1, 2, 3});
  // an integer tensor in constant mode, the value truncated as torch's
  const Tensor ids = Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3}, DType::i64);
  const Tensor p = pad(ids, {1, 1}, PadMode::constant, 2.7);
  CHECK(p.dtype() == DType::i64);
  CHECK(ints(p) == std::vector<double>{2, 0, 1, 2, 2, 2, 3, 4, 5, 2});
  // NaN as the value
  CHECK(std::isnan(pad(Tensor::zeros({1, 2}), {1, 0}, PadMode::constant, NAN).to_vector()[0]));
  // an empty batch pads its other axes
  CHECK(pad(Tensor::zeros({0, 2, 3}), {1, 1}, PadMode::reflect).shape() == Shape{0, 2, 5});
}

TEST_CASE("pad: refusals name the op, the mode and the axis") {
  const Tensor x = Tensor::zeros({1, 3, 4});
  check_error([&] { pad(x, {1}); }, {"pad", "divisible by 2"});
  check_error([&] { pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, {"pad", "too large", "4 pairs"});
  check_error([&] { pad(x, {-3, -2}); }, {"pad", "axis 2", "negative"});
  check_error(
      [&] {
        pad(x, {4, 3}, PadMode::reflect);
      },
      {"pad", "reflect", "(4, 3)", "axis 2", "size 4", "less than"});
  check_error([&] { pad(x, {1, 1, 3, 1}, PadMode::reflect); }, {"axis 1", "size 3"});
  check_error([&] { pad(x, {1, 1}, PadMode::reflect, 1.0); }, {"reflect", "value"});
  check_error(
      [&] {
        pad(Tensor::zeros({4}), {1, 1}, PadMode::reflect);
      },
      {"pad", "2 or 3 axes", "[4]"});
  check_error(
      [&] {
        pad(Tensor::zeros({1, 1, 1, 1, 4}), {1, 1}, PadMode::replicate);
      },
      {"pad", "2 or 3 axes"});
  check_error([&] { pad(x, {1, 1, 1, 1, 1, 1}, PadMode::replicate); }, {"4 or 5 axes"});
  check_error([&] { pad(x, {-2, -2}, PadMode::replicate); }, {"replicate", "too small"});
  check_error([&] { pad(Tensor::zeros({1, 2, 0}), {1, 1}, PadMode::replicate); }, {"empty"});
  check_error(
      [&] {
        pad(Tensor::zeros({1, 2}, DType::i64), {1, 1}, PadMode::reflect);
      },
      {"pad", "float32 or float64", "reflect"});
  CHECK(pad(x, {2, 2}, PadMode::replicate).shape() == Shape{1, 3, 8});  // replicate: any size
  check_error([&] { pad(x, {5, 0}, PadMode::circular); }, {"circular", "wrapping around"});
  check_error(
      [&] {
        pad(x, {4, -1}, PadMode::circular);
      },
      {"circular", "3 elements after cropping"});
  check_error(
      [&] {
        pad(Tensor::zeros({3, 4}), {1, 1}, PadMode::circular);
      },
      {"circular", "3 axes", "[3, 4]"});
  check_error([&] { pad(x, {1, 1}, PadMode::circular, 2.0); }, {"circular", "value"});
  const Tensor ints3 = Tensor::from_vector(std::vector<double>{0, 1, 2, 3}, {1, 1, 4}, DType::i64);
  CHECK(pad(ints3, {1, 1}, PadMode::circular).to_vector() ==
        std::vector<double>{3, 0, 1, 2, 3, 0});  // any dtype, as torch
}

TEST_CASE("flip, roll, tril, triu against torch 1.13") {
  check_case("flip", {3, 2, 4}, false, [](const Tensor& x) { return flip(x, {0, -1}); });
  check_case("roll.flat", {3, 4}, false, [](const Tensor& x) { return roll(x, {5}); });
  check_case("roll.dims", {3, 4, 2}, false, [](const Tensor& x) {
    return roll(x, {2, -1, 1}, {0, 1, 0});
  });
  check_case("tril", {2, 3, 4}, false, [](const Tensor& x) { return tril(x, -1); });
  check_case("triu", {3, 5}, false, [](const Tensor& x) { return triu(x, 1); });
}

TEST_CASE("flip, roll, tril, triu: 0-d, empty and integer tensors, refusals") {
  const Tensor s = Tensor::full({}, 3.0, DType::f64);
  CHECK(flip(s, {0}).item() == 3.0);
  CHECK(flip(s, {}).item() == 3.0);
  CHECK(roll(s, {1}).item() == 3.0);
  CHECK(roll(Tensor::zeros({0, 3}), {1}, {0}).shape() == Shape{0, 3});
  CHECK(roll(Tensor::zeros({0, 3}), {1}).shape() == Shape{0, 3});
  const Tensor r =
      Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}, DType::i64);
  CHECK(ints(roll(r, {1})) == std::vector<double>{8, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ints(roll(r, {1}, {0})) == std::vector<double>{7, 8, 1, 2, 3, 4, 5, 6});
  CHECK(ints(roll(r, {1, 1}, {0, 0})) == std::vector<double>{5, 6, 7, 8, 1, 2, 3, 4});
  CHECK(ints(roll(r, {-13}, {1})) == std::vector<double>{2, 1, 4, 3, 6, 5, 8, 7});
  CHECK(roll(r, {1}).dtype() == DType::i64);
  CHECK(ints(tril(Tensor::ones({3, 3}, DType::i64))) ==
        std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(ints(triu(Tensor::ones({2, 3}), -5)) == std::vector<double>(6, 1.0));
  CHECK(ints(triu(Tensor::ones({2, 3}), 7)) == std::vector<double>(6, 0.0));
  check_error([&] { flip(r, {0, -2}); }, {"flip", "dim 0 appears multiple times"});
  check_error([&] { flip(r, {2}); }, {"flip"});
  check_error([&] { roll(r, {}); }, {"roll", "shifts"});
  check_error([&] { roll(r, {1, 2}); }, {"roll", "shifts and dimensions must align"});
  check_error([&] { roll(r, {1}, {2}); }, {"roll"});
  check_error([&] { roll(s, {1}, {0}); }, {"roll"});
  check_error([&] { tril(Tensor::zeros({5})); }, {"tril", "at least 2 axes"});
  check_error([&] { triu(s); }, {"triu", "at least 2 axes"});
}

TEST_CASE("sort, argsort, topk against torch 1.13: values, gradients, indices") {
  check_case("sort.values", {3, 5}, true, [](const Tensor& x) { return sort(x).values; });
  check_case("sort.desc0", {4, 3}, true, [](const Tensor& x) { return sort(x, 0, true).values; });
  check_case("topk.k3", {2, 7}, true, [](const Tensor& x) { return topk(x, 3).values; });
  check_case("topk.small0", {5, 3}, true,
             [](const Tensor& x) { return topk(x, 2, 0, false).values; });
  for (DType d : {DType::f64, DType::f32}) {
    const Tensor x = distinct({3, 5}, d);
    const ValuesAndIndices s = sort(x);
    CHECK(s.indices.dtype() == DType::i64);
    CHECK(ints(s.indices) == golden("sort.indices"));
    CHECK(ints(sort(distinct({4, 3}, d), 0, true).indices) == golden("sort.desc0.indices"));
    CHECK(ints(topk(distinct({2, 7}, d), 3).indices) == golden("topk.k3.indices"));
    CHECK(ints(topk(distinct({5, 3}, d), 2, 0, false).indices) == golden("topk.small0.indices"));
    const Tensor a = argsort(x, 1, true);
    CHECK(a.dtype() == DType::i64);
    CHECK(ints(a) == golden("argsort.desc"));
    CHECK_FALSE(a.requires_grad());
  }
}

TEST_CASE("sort: ties keep torch's stable order, NaN is the largest") {
  const Tensor ties =
      Tensor::from_vector(std::vector<double>{3, 1, 3, 2, 1, 3, NAN, 2, 1, 3}, {10}, DType::f64);
  for (bool stable : {false, true}) {
    CHECK(ints(sort(ties, -1, false, stable).indices) == golden("ties.asc"));
    CHECK(ints(sort(ties, -1, true, stable).indices) == golden("ties.desc"));
  }
  std::vector<double> long_ties(40);
  for (int k = 0; k < 40; ++k) long_ties[k] = k % 3;
  const Tensor lt = Tensor::from_vector(long_ties, {40}, DType::f32);
  CHECK(ints(sort(lt, 0, false, true).indices) == golden("ties.long"));
  CHECK(ints(argsort(lt, 0, true, true)) == golden("ties.long_desc"));
  // topk: ties, the lower index first (torch's order there is unspecified)
  CHECK(ints(topk(ties, 4).indices) == std::vector<double>{6, 0, 2, 5});
  CHECK(ints(topk(ties, 3, 0, false).indices) == std::vector<double>{1, 4, 8});
  // integer tensors sort too (no gradient)
  const Tensor i = Tensor::from_vector(std::vector<double>{3, 1, 2}, {3}, DType::i64);
  CHECK(ints(sort(i).values) == std::vector<double>{1, 2, 3});
  CHECK(sort(i).values.dtype() == DType::i64);
}

TEST_CASE("sort, topk: 0-d and empty tensors, refusals") {
  const Tensor s = Tensor::full({}, 3.0, DType::f64);
  CHECK(sort(s).values.item() == 3.0);
  CHECK(sort(s).indices.shape() == Shape{});
  CHECK(topk(s, 1).values.item() == 3.0);
  CHECK(topk(Tensor::zeros({2, 6}), 0).values.shape() == Shape{2, 0});
  const Tensor x = Tensor::zeros({6});
  check_error([&] { topk(x, 7); }, {"topk", "k = 7 out of range", "6 elements"});
  check_error([&] { topk(x, -1); }, {"topk", "out of range"});
  check_error([&] { topk(s, 2); }, {"topk", "0-d"});
  check_error([&] { sort(x, 1); }, {"sort"});
  check_error([&] { argsort(s, 1); }, {"argsort"});
  CHECK_THROWS_AS(topk(x, 7), std::out_of_range);
}

TEST_CASE("var, std, var_mean, std_mean against torch 1.13") {
  check_case("var.dim1", {3, 5}, false, [](const Tensor& x) { return var(x, {1}); });
  check_case("var.all_c0", {3, 4}, false, [](const Tensor& x) { return var(x, {}, 0); });
  check_case("var.keep", {2, 3, 4}, false, [](const Tensor& x) { return var(x, {0, 2}, 2, true); });
  check_case("std.dim0", {4, 3}, false, [](const Tensor& x) { return dg::std(x, {0}, false); });
  check_case("var_mean", {3, 4}, false, [](const Tensor& x) {
    auto [v, m] = var_mean(x, {1});
    return stack({v, m}, 0);
  });
  check_case("std_mean", {2, 5}, false, [](const Tensor& x) {
    auto [s, m] = std_mean(x, {}, 1);
    return stack({s, m}, 0);
  });
}

TEST_CASE("var: the divisor max(0, N − correction), 0-d and empty tensors, refusals") {
  const Tensor y = Tensor::from_vector(std::vector<double>{1, 2, 4, 3, 5, 9}, {2, 3}, DType::f64);
  CHECK(var(y).item() == doctest::Approx(8.0).epsilon(1e-15));
  CHECK(var(y, {1}, 3).to_vector() == std::vector<double>{INFINITY, INFINITY});
  CHECK(var(y, {1}, 4).to_vector() == std::vector<double>{INFINITY, INFINITY});
  CHECK(var(y, {1}, -1).to_vector()[0] == doctest::Approx(7.0 / 6.0).epsilon(1e-15));
  CHECK(var(y, {}, 1, true).shape() == Shape{1, 1});
  CHECK(std::isnan(var(Tensor::full({}, 3.0)).item()));  // one element: 0/0
  CHECK(std::isnan(var(Tensor::zeros({0})).item()));
  check_error([&] { var(y, {0, 0}); }, {"var", "repeated"});
  check_error([&] { var(y, {2}); }, {"var"});
  check_error([&] { dg::std(Tensor::zeros({2}, DType::i64)); }, {"var", "floating point"});
}

TEST_CASE("one_hot against torch 1.13: int64, inferred and given num_classes, refusals") {
  const Tensor ids = Tensor::from_vector(std::vector<double>{2, 0, 1, 1, 4, 0}, {2, 3}, DType::i64);
  const Tensor h = one_hot(ids);
  CHECK(h.dtype() == DType::i64);
  CHECK(h.shape() == Shape{2, 3, 5});
  CHECK(ints(h) == golden("one_hot"));
  const Tensor h6 = one_hot(Tensor::from_ids({2, 0, 3}, {3}), 6);  // int32 ids read too
  CHECK(h6.shape() == Shape{3, 6});
  CHECK(ints(h6) == golden("one_hot.6"));
  CHECK(one_hot(Tensor::from_ids({2}, {}), 3).shape() == Shape{3});
  CHECK(one_hot(Tensor::empty({0}, DType::i64), 4).shape() == Shape{0, 4});
  check_error([&] { one_hot(Tensor::from_ids({1, -1}, {2})); }, {"one_hot", "non-negative"});
  check_error([&] { one_hot(Tensor::from_ids({1, 3}, {2}), 3); }, {"one_hot", "smaller than"});
  check_error([&] { one_hot(Tensor::empty({0}, DType::i64)); }, {"one_hot", "empty"});
  check_error([&] { one_hot(Tensor::zeros({2})); }, {"one_hot", "index"});
}

TEST_CASE("sort and pad families: second derivatives (create_graph) pass gradgradcheck") {
  std::vector<OpCase> rows = sort_op_cases();
  for (const OpCase& c : pad_op_cases()) rows.push_back(c);
  for (const OpCase& c : rows) {
    CAPTURE(c.name);
    const OpCaseGradgradResult r = run_op_case_gradgrad(c);
    INFO(r.grad.message);
    CHECK(r.supported);
    CHECK(r.grad.passed);
    CHECK(r.grad.checks > 0);
  }
}

TEST_CASE("the new ops record one node each and save nothing the backward does not read") {
  Tensor x = random_tensor({3, 4}, 5);
  const int64_t before = live_graph_nodes();
  {
    Tensor y = pad(x, {1, 1}, PadMode::reflect);
    CHECK(live_graph_nodes() == before + 1);
  }
  CHECK(live_graph_nodes() == before);
  // an in-place write after pad does not stop its backward (it reads only maps)
  Tensor y = pad(x, {1, 1});
  x.fill(0.0);
  backward(sum(y));
  CHECK(x.grad().to_vector() == std::vector<double>(12, 1.0));
}
