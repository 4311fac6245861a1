// Tests of max/min along an axis and of the whole tensor, argmax/argmin (tensor/kernels_reduce.h,
// autograd/ops_reduce.cpp): the fast kernel against the reference (every layout), float32 bit
// identity at 1 and 2 threads, ties and NaN as torch, gradients to the index position and split
// among ties (values from torch 1.13), errors. Finite differences: the reduce rows of the table.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "tensor/kernels_reduce.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

TEST_CASE_TEMPLATE("max_dim kernels: fast matches reference, with ties and NaN", T, float, double) {
  for (const auto& sizes : {std::array<int64_t, 3>{7, 13, 1}, {3, 9, 5}, {1, 40, 1}}) {
    // variables, not a structured binding: CAPTURE's lambda cannot capture one under clang 14
    const int64_t outer = sizes[0], C = sizes[1], inner = sizes[2];
    CAPTURE(outer);
    CAPTURE(inner);
    auto x = rand_vec<T>(outer * C * inner, 81);
    for (size_t k = 0; k < x.size(); k += 7) x[k] = std::round(x[k]);  // ties
    x[5] = std::numeric_limits<T>::quiet_NaN();
    for (bool is_max : {true, false}) {
      std::vector<T> v(outer * inner), v_ref(outer * inner);
      std::vector<int64_t> i(outer * inner), i_ref(outer * inner);
      max_dim_forward<T>(v.data(), i.data(), x.data(), outer, C, inner, is_max);
      ref_max_dim_forward<T>(v_ref.data(), i_ref.data(), x.data(), outer, C, inner, is_max);
      CHECK(same_bits(v, v_ref));
      CHECK(i == i_ref);
    }
  }
}

TEST_CASE("max_dim kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  const int64_t outer = 160, C = 300, inner = 3;  // above kParallelGrain
  auto x = rand_vec<float>(outer * C * inner, 82);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<float> v(outer * inner);
    std::vector<int64_t> i(outer * inner);
    max_dim_forward<float>(v.data(), i.data(), x.data(), outer, C, inner, true);
    Tensor xt = Tensor::from_vector(std::vector<double>(x.begin(), x.end()), {outer, C, inner})
                    .set_requires_grad(true);
    backward(sum(max(xt, 1).values));  // the scatter of the backward, too
    return std::make_pair(v, xt.grad().to_floats());
  };
  auto one = run(1), two = run(2);
  CHECK(same_bits(one.first, two.first));
  CHECK(same_bits(one.second, two.second));
}

// torch 1.13: a = [[1, 3, 3], [2, -1, 3]]; a.max() = 3 with gradient 1/3 at each of the three
// 3s (evenly split among ties); a.max(1) = ([3, 3], [1, 2]) (the first maximum);
// a.argmax() = 1; a.argmin(0) = [0, 1, 0]; max of [1, nan, 3, nan] along 0 = (nan, 1).
TEST_CASE("max/min: values, first index, ties and NaN as torch") {
  Tensor a = Tensor::from_vector({1, 3, 3, 2, -1, 3}, {2, 3}, DType::f64).set_requires_grad(true);
  Tensor m = max(a);
  CHECK(m.dim() == 0);
  CHECK(m.item() == 3.0);
  backward(m);
  const double third = 1.0 / 3.0;
  CHECK(a.grad().to_vector() == std::vector<double>{0, third, third, 0, 0, third});

  auto [v, i] = max(a, 1);
  CHECK(v.to_vector() == std::vector<double>{3, 3});
  CHECK(i.dtype() == DType::i64);
  CHECK(i.to_vector() == std::vector<double>{1, 2});
  a.zero_grad();
  backward(sum(v));
  CHECK(a.grad().to_vector() == std::vector<double>{0, 1, 0, 0, 0, 1});  // the index positions

  auto kept = min(a, 0, true);
  CHECK(kept.values.shape() == Shape{1, 3});
  CHECK(kept.values.to_vector() == std::vector<double>{1, -1, 3});
  CHECK(kept.indices.to_vector() == std::vector<double>{0, 1, 0});
  CHECK(argmax(a).item() == 1);
  CHECK(argmax(a).dim() == 0);
  CHECK(argmin(a, 0).to_vector() == std::vector<double>{0, 1, 0});
  CHECK(argmax(a, -1, true).shape() == Shape{2, 1});
  CHECK(min(a).item() == -1.0);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor b = Tensor::from_vector({1, nan, 3, nan}, {4});
  auto nb = max(b, 0);
  CHECK(std::isnan(nb.values.item()));
  CHECK(nb.indices.item() == 1);
  CHECK(argmax(b).item() == 1);
  CHECK(std::isnan(min(b).item()));
  // the gradient of a NaN max goes evenly to the NaNs (torch: mask = isnan(x) & isnan(v))
  Tensor c = Tensor::from_vector({1, nan, 3, nan}, {4}, DType::f64).set_requires_grad(true);
  backward(max(c));
  CHECK(c.grad().to_vector() == std::vector<double>{0, 0.5, 0, 0.5});
}

TEST_CASE("max/min/argmax: errors name the op and the tensor") {
  CHECK_THROWS_WITH(max(Tensor::zeros({2, 0}), 1),
                    doctest::Contains("max: expected a non-empty axis"));
  CHECK_THROWS_WITH(min(Tensor::zeros({0})), doctest::Contains("min: expected a non-empty tensor"));
  CHECK_THROWS_WITH(argmax(Tensor::zeros({2, 3}), 2), doctest::Contains("argmax"));
  CHECK_THROWS_WITH(max(Tensor::from_ids({1, 2}, {2}), 0),
                    doctest::Contains("max: expected a float"));
}
