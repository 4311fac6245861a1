// Tests of the fused linear head + cross-entropy (tensor/kernels_loss.h and the op
// linear_cross_entropy in autograd/ops_loss.cpp): the chunked kernels against the plain reference
// over the full logits (several chunks with a remainder, one chunk, ignored rows, a gradient
// not asked for), float32 results bit-identical at 1 and 2 threads, the op against
// cross_entropy(linear(x, W)) in value and gradients, MicroLM::loss against its logits, and the
// error messages. The gradient-check rows are in loss_op_cases() (autograd/ops_loss.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/micro_lm.h"
#include "tensor/kernels_loss.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

namespace {

// Targets in [0, V) with every `ignore_every`-th row set to -100.
std::vector<int32_t> targets_for(int64_t N, int64_t V, uint64_t seed, int64_t ignore_every) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = n % ignore_every == 1 ? -100 : int32_t(rng() % V);
  return t;
}

}  // namespace

TEST_CASE("lm_head_chunk: a multiple of 16 within the scratch budget, at least 16, at most V") {
  CHECK(lm_head_chunk(1024, 50304) == 4096);
  CHECK(lm_head_chunk(1024, 100) == 100);
  CHECK(lm_head_chunk(1 << 30, 50304) == 16);
  CHECK(lm_head_chunk(1000, 50304) % 16 == 0);
  CHECK(lm_head_chunk(1000, 50304) * 1000 <= kLmHeadScratch);
}

TEST_CASE_TEMPLATE("lm_head_ce kernels match the full-logits reference", T, float, double) {
  const int64_t N = 29, D = 11, V = 37;
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
  const auto x = rand_vec<T>(N * D, 1, -2, 2), W = rand_vec<T>(V * D, 2, -2, 2);
  const auto targets = targets_for(N, V, 3, 5);
  const T scale = T(0.37);
  std::vector<T> ref_loss(N), ref_lse(N), ref_dx(N * D, T(0.5)), ref_dW(V * D, T(-0.25));
  ref_lm_head_ce_forward<T>(ref_loss.data(), ref_lse.data(), x.data(), W.data(), targets.data(), N,
                            D, V, -100);
  ref_lm_head_ce_backward<T>(ref_dx.data(), ref_dW.data(), x.data(), W.data(), ref_lse.data(),
                             targets.data(), scale, N, D, V, -100);
  for (int64_t chunk : {int64_t(16), int64_t(1), V, int64_t(1000)}) {
    CAPTURE(chunk);
    const int64_t w = std::min(chunk, V);
    std::vector<T> loss(N), lse(N), dx(N * D, T(0.5)), dW(V * D, T(-0.25)), scratch(N * w);
    lm_head_ce_forward<T>(loss.data(), lse.data(), x.data(), W.data(), targets.data(), N, D, V,
                          -100, w, scratch.data());
    CHECK(rel_diff(loss, ref_loss) <= tol);
    CHECK(rel_diff(lse, ref_lse) <= tol);
    for (int64_t n = 0; n < N; ++n)
      if (targets[n] == -100) CHECK(loss[n] == T(0));
    lm_head_ce_backward<T>(dx.data(), dW.data(), x.data(), W.data(), lse.data(), targets.data(),
                           scale, N, D, V, -100, w, scratch.data());
    CHECK(rel_diff(dx, ref_dx) <= tol);
    CHECK(rel_diff(dW, ref_dW) <= tol);
    if (w == V) {  // one chunk: the forward's logits reused instead of recomputed, same bits
      std::vector<T> dx2(N * D, T(0.5)), dW2(V * D, T(-0.25));
      lm_head_ce_forward<T>(loss.data(), lse.data(), x.data(), W.data(), targets.data(), N, D, V,
                            -100, w, scratch.data());
      lm_head_ce_backward<T>(dx2.data(), dW2.data(), x.data(), W.data(), lse.data(), targets.data(),
                             scale, N, D, V, -100, w, scratch.data(), true);
      CHECK(std::memcmp(dx2.data(), dx.data(), dx.size() * sizeof(T)) == 0);
      CHECK(std::memcmp(dW2.data(), dW.data(), dW.size() * sizeof(T)) == 0);
    }
  }
  SUBCASE("a null gradient is skipped, the other one is unchanged") {
    std::vector<T> loss(N), lse(N), dx(N * D, T(0.5)), dW(V * D, T(-0.25)), scratch(N * 16);
    lm_head_ce_forward<T>(loss.data(), lse.data(), x.data(), W.data(), targets.data(), N, D, V,
                          -100, 16, scratch.data());
    lm_head_ce_backward<T>(dx.data(), nullptr, x.data(), W.data(), lse.data(), targets.data(),
                           scale, N, D, V, -100, 16, scratch.data());
    CHECK(rel_diff(dx, ref_dx) <= tol);
    lm_head_ce_backward<T>(nullptr, dW.data(), x.data(), W.data(), lse.data(), targets.data(),
                           scale, N, D, V, -100, 16, scratch.data());
    CHECK(rel_diff(dW, ref_dW) <= tol);
  }
}

TEST_CASE("lm_head_ce kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Large enough for split GEMMs and parallel row loops; 700 = 4·160 + 60 columns.
  const int64_t N = 300, D = 64, V = 700, chunk = 160;
  const auto x = rand_vec<float>(N * D, 4, -2, 2), W = rand_vec<float>(V * D, 5, -2, 2);
  const auto targets = targets_for(N, V, 6, 7);
  auto run = [&](int threads) {
    set_threads(threads);
    std::vector<float> loss(N), lse(N), dx(N * D, 0.0f), dW(V * D, 0.0f), scratch(N * chunk);
    lm_head_ce_forward<float>(loss.data(), lse.data(), x.data(), W.data(), targets.data(), N, D, V,
                              -100, chunk, scratch.data());
    lm_head_ce_backward<float>(dx.data(), dW.data(), x.data(), W.data(), lse.data(), targets.data(),
                               1.0f / N, N, D, V, -100, chunk, scratch.data());
    return std::vector<std::vector<float>>{loss, lse, dx, dW};
  };
  const auto one = run(1), two = run(2);
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("linear_cross_entropy equals cross_entropy(linear(x, W)) in value and gradients") {
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dtype));
    const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
    const int64_t N = 12, D = 8, V = 40;
    Tensor t = Tensor::from_ids(targets_for(N, V, 7, 4), {N});
    auto rt = [&](const Shape& shape, uint64_t seed) {
      Tensor r = random_tensor(shape, seed, -1.5, 1.5, false).to(dtype);
      r.set_requires_grad(true);
      return r;
    };
    auto make = [&] { return std::vector<Tensor>{rt({N, D}, 8), rt({V, D}, 9)}; };
    std::vector<Tensor> a = make(), b = make();
    Tensor fused = linear_cross_entropy(a[0], a[1], t);
    backward(scale(fused, 0.7));  // one graph at a time: backward clears the tape
    Tensor plain = cross_entropy(linear(b[0], b[1]), t);
    backward(scale(plain, 0.7));
    CHECK(std::fabs(fused.item() - plain.item()) <= tol);
    CHECK(rel_diff(a[0].grad().to_vector(), b[0].grad().to_vector()) <= tol);
    CHECK(rel_diff(a[1].grad().to_vector(), b[1].grad().to_vector()) <= tol);
  }
}

TEST_CASE(
    "linear_cross_entropy: every target ignored gives NaN and zero gradients, like cross_entropy") {
  Tensor x = random_tensor({3, 4}, 10), W = random_tensor({5, 4}, 11);
  Tensor loss = linear_cross_entropy(x, W, Tensor::from_ids({-100, -100, -100}, {3}));
  CHECK(std::isnan(loss.item()));
  backward(loss);
  for (double g : x.grad().to_vector()) CHECK(g == 0.0);
  for (double g : W.grad().to_vector()) CHECK(g == 0.0);
}

TEST_CASE("linear_cross_entropy: errors name the op and the offending tensor or target") {
  Tensor x = random_tensor({3, 4}, 12), W = random_tensor({5, 4}, 13);
  CHECK_THROWS_WITH(
      linear_cross_entropy(x, W, Tensor::from_ids({0, 5, 1}, {3})),
      doctest::Contains("linear_cross_entropy: target 5 at row 1 is out of range for 5 classes"));
  CHECK_THROWS_WITH(
      linear_cross_entropy(random_tensor({3, 6}, 14), W, Tensor::from_ids({0, 1, 2}, {3})),
      doctest::Contains("linear_cross_entropy: expected x of shape [N, 4]"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, W, Tensor::from_ids({0, 1}, {2})),
                    doctest::Contains("int32 targets of shape [3]"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, W.to(DType::f32), Tensor::from_ids({0, 1, 2}, {3})),
                    doctest::Contains("dtypes differ"));
}

TEST_CASE("MicroLM::loss (fused head) equals cross_entropy of MicroLM::forward, tied and untied") {
  for (bool tied : {true, false}) {
    CAPTURE(tied);
    MicroLMConfig c;
    c.vocab = 97;
    c.dim = 16;
    c.layers = 2;
    c.heads = 2;
    c.kv_heads = 2;
    c.seq_len = 8;
    c.tied_head = tied;
    MicroLM model(c, DType::f64);
    model.init_identical(3);
    std::vector<int32_t> ids(16), next(16);
    for (int i = 0; i < 16; ++i) ids[i] = (i * 37 + 5) % 97, next[i] = (i * 11 + 2) % 97;
    Tensor in = Tensor::from_ids(ids, {2, 8}), tg = Tensor::from_ids(next, {2, 8});
    const double fused = model.loss(in, tg).item();
    NoGradGuard no_grad;
    const double plain =
        cross_entropy(reshape(model.forward(in), {16, 97}), tg.view_reshape({16})).item();
    CHECK(std::fabs(fused - plain) <= 1e-12);
  }
}
