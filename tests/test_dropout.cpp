// Tests of dropout (autograd/ops_dropout.cpp): identity when not training or p = 0, zeros when
// p = 1, inverted scaling 1/(1 − p), the mask drawn from the generator (the same seed gives the
// same mask, at either dtype and at 1 and 2 threads), the backward multiplying by that mask, and
// errors. Finite differences: the dropout rows of the gradient-check table.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "tensor/rng.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

TEST_CASE("dropout: identity when not training or p == 0, zeros when p == 1") {
  Tensor x = Tensor::from_vector({1, -2, 3, 4}, {2, 2}).set_requires_grad(true);
  TorchGenerator gen(1);
  CHECK(dropout(x, 0.5, false, gen).same(x));
  CHECK(dropout(x, 0.0, true, gen).same(x));
  Tensor z = dropout(x, 1.0, true, gen);
  CHECK(z.to_vector() == std::vector<double>{0, 0, 0, 0});
  backward(sum(z));
  CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 0, 0});
  CHECK_THROWS_WITH(dropout(x, 1.5, true, gen), doctest::Contains("dropout: p must be in [0, 1]"));
  CHECK_THROWS_WITH(dropout(Tensor::from_ids({1}, {1}), 0.5, true, gen),
                    doctest::Contains("dropout: expected a float"));
}

TEST_CASE("dropout: kept elements scaled by 1/(1 - p), the backward uses the same mask") {
  const int64_t n = 20000;
  const double p = 0.3;
  Tensor x = Tensor::ones({n}).set_requires_grad(true);
  TorchGenerator gen(42);
  Tensor y = dropout(x, p, true, gen);
  const float kept = 1.0f / static_cast<float>(1.0 - p);
  int64_t count = 0;
  std::vector<float> v = y.to_floats();
  for (float e : v) {
    CHECK((e == 0.0f || e == kept));
    count += e != 0.0f;
  }
  CHECK(std::fabs(static_cast<double>(count) / n - (1 - p)) < 0.02);  // ~4.4 standard deviations
  backward(sum(y));
  CHECK(same_bits(x.grad().to_floats(), v));  // d/dx of x ⊙ noise with x = 1 is the noise
}

TEST_CASE("dropout: the mask follows the generator only (seed, dtype, thread count)") {
  ThreadsGuard guard;
  const int64_t n = 200000;  // above kParallelGrain: the multiply runs in parallel
  auto run = [&](int threads, DType d, uint64_t seed) {
    set_threads(threads);
    TorchGenerator gen(seed);
    Tensor x = Tensor::from_vector(rand_vec<double>(n, 5), {n / 100, 100}, d);
    return dropout(x, 0.5, true, gen).to_floats();
  };
  auto one = run(1, DType::f32, 9);
  CHECK(same_bits(one, run(2, DType::f32, 9)));
  CHECK(same_bits(one, run(2, DType::f64, 9)));  // same mask; the values round to the same floats
  CHECK(!same_bits(one, run(1, DType::f32, 10)));
  // a strided view of the same values gives the contiguous input's bits (the mask is by position)
  for (int threads : {1, 2}) {
    set_threads(threads);
    TorchGenerator gen(9);
    Tensor x = Tensor::from_vector(rand_vec<double>(n, 5), {n / 100, 100}, DType::f32);
    Tensor strided = transpose(transpose(x, 0, 1).contiguous(), 0, 1);
    REQUIRE(!strided.is_contiguous());
    CHECK(same_bits(one, dropout(strided, 0.5, true, gen).to_floats()));
  }
  // two calls on one generator draw different masks (the stream advances)
  TorchGenerator gen(3);
  Tensor x = Tensor::ones({64});
  CHECK(!same_bits(dropout(x, 0.5, true, gen).to_floats(), dropout(x, 0.5, true, gen).to_floats()));
}
