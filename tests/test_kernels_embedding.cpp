// Tests of the embedding family (tensor/kernels_embedding.h, autograd/ops_embedding.cpp): the
// backward scatter-add against the serial reference bit for bit, float32 bit-identity at 1 and 2
// threads, and the op's gathering, accumulation and errors. Gradients: the embedding rows of the
// gradient-check table (autograd/ops_embedding.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/ops.h"
#include "tensor/kernels_embedding.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

// ---- fast kernels against the reference kernels -------------------------------------------------

TEST_CASE_TEMPLATE("embedding kernels: fast matches reference", T, float, double) {
  const int64_t D = 96;

  SUBCASE("embedding backward equals the serial scatter-add bit for bit") {
    const int64_t N = 200, V = 13;
    auto ids = rand_ints<int32_t>(N, V, 1);
    auto dout = rand_vec<T>(N * D, 2);
    auto a = rand_vec<T>(V * D, 3), b = a;
    embedding_backward<T>(a.data(), dout.data(), ids.data(), N, V, D);
    ref_embedding_backward<T>(b.data(), dout.data(), ids.data(), N, V, D);
    CHECK(same_bits(a, b));
    std::vector<T> out(N * D), W = rand_vec<T>(V * D, 4);
    embedding_forward<T>(out.data(), ids.data(), W.data(), N, D);
    CHECK(out[5 * D + 7] == W[ids[5] * D + 7]);
  }
}

// ---- thread-count independence ------------------------------------------------------------------

TEST_CASE("embedding kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t rows = 450, D = 160, V = 50;
  auto ids = rand_ints<int32_t>(rows * 2, V, 5);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // embedding backward (repeated ids, D wide rows)
      std::vector<float> dW(V * D, 0.5f);
      auto g = rand_vec<float>(rows * 2 * D, 11);
      embedding_backward<float>(dW.data(), g.data(), ids.data(), rows * 2, V, D);
      keep(dW);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- op-level behaviour and errors --------------------------------------------------------------

TEST_CASE("embedding: rows gathered, repeated ids accumulate, out-of-range ids throw") {
  Tensor W = Tensor::from_vector(pattern(10, 3, 7, 3, 2.0), {5, 2}).set_requires_grad(true);
  Tensor ids = Tensor::from_ids({4, 1, 4, 4}, {2, 2});
  Tensor y = embedding(W, ids);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(y.at({1, 0, 1}) == W.at({4, 1}));
  backward(sum(y));
  CHECK(W.grad().at({4, 0}) == 3.0);
  CHECK(W.grad().at({1, 1}) == 1.0);
  CHECK(W.grad().at({0, 0}) == 0.0);
  CHECK_THROWS_WITH(embedding(W, Tensor::from_ids({0, 7}, {2})),
                    doctest::Contains("id 7 at position 1 is out of range for vocabulary size 5"));
  CHECK_THROWS_WITH(embedding(W, Tensor::from_ids({-1}, {1})), doctest::Contains("id -1"));
  CHECK_THROWS_WITH(embedding(W, W), doctest::Contains("embedding"));
}
