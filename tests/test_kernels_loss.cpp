// Tests of the loss and softmax families (tensor/kernels_loss.h, tensor/kernels_softmax.h,
// autograd/ops_loss.cpp, autograd/ops_softmax.cpp): the fused linear head
// + cross-entropy (chunked kernels against the plain reference over the full logits: several
// chunks with a remainder, one chunk, ignored rows, a gradient not asked for; float32 bit-identity
// at 1 and 2 threads; the op against cross_entropy(linear(x, W)); MicroLM::loss against its
// logits; errors), then softmax and cross_entropy (fast kernels against the reference kernels,
// thread bit-identity, torch 1.13 goldens, errors). Gradients: loss_op_cases() and
// softmax_op_cases() rows; the plain twins against the fused ops: tests/test_plain_ops.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "tensor/kernels_loss.h"
#include "tensor/kernels_softmax.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"
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

std::vector<int32_t> rand_ids(int64_t n, int32_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % V);
  return v;
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
  check_same_bits_at_1_and_2_threads(run);
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
    backward(scale(fused, 0.7));
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
        cross_entropy(reshape(model.forward(in), {16, 97}), dg::raw::view_reshape(tg, {16})).item();
    CHECK(std::fabs(fused - plain) <= 1e-12);
  }
}

// ---- softmax and cross_entropy: fast kernels against the reference kernels ----------------------

TEST_CASE_TEMPLATE("softmax and cross_entropy kernels: fast matches reference", T, float, double) {
  const int64_t rows = 67;  // not a multiple of kRowChunk

  SUBCASE("softmax and log_softmax, last and middle axis") {
    for (bool log : {false, true})
      for (auto dims : {std::tuple<int64_t, int64_t, int64_t>{rows, 37, 1}, {5, 11, 7}}) {
        const auto [outer, C, inner_] = dims;
        const int64_t inner = inner_;  // a plain variable: clang < 16 cannot capture a binding
        CAPTURE(log);
        CAPTURE(inner);
        const int64_t n = outer * C * inner;
        auto x = rand_vec<T>(n, 5, -4, 4);
        std::vector<T> y(n), y_ref(n);
        softmax_forward<T>(y.data(), x.data(), outer, C, inner, log);
        ref_softmax_forward<T>(y_ref.data(), x.data(), outer, C, inner, log);
        CHECK(rel_diff(y, y_ref) < tol<T>());
        auto dy = rand_vec<T>(n, 6);
        auto dx = rand_vec<T>(n, 7), dx_ref = dx;
        softmax_backward<T>(dx.data(), dy.data(), y.data(), outer, C, inner, log);
        ref_softmax_backward<T>(dx_ref.data(), dy.data(), y.data(), outer, C, inner, log);
        CHECK(rel_diff(dx, dx_ref) < tol<T>());
      }
  }

  SUBCASE("cross-entropy with ignored rows") {
    const int64_t N = rows, C = 29;
    auto logits = rand_vec<T>(N * C, 8, -5, 5);
    auto targets = rand_ids(N, C, 9);
    for (int64_t n = 0; n < N; n += 5) targets[n] = -1;
    std::vector<T> loss(N), lse(N), loss_ref(N), lse_ref(N);
    cross_entropy_forward<T>(loss.data(), lse.data(), logits.data(), targets.data(), N, C, -1);
    ref_cross_entropy_forward<T>(loss_ref.data(), lse_ref.data(), logits.data(), targets.data(), N,
                                 C, -1);
    CHECK(rel_diff(loss, loss_ref) < tol<T>());
    CHECK(rel_diff(lse, lse_ref) < tol<T>());
    CHECK(loss[0] == T(0));
    auto d = rand_vec<T>(N * C, 10), d_ref = d;
    cross_entropy_backward<T>(d.data(), logits.data(), lse.data(), targets.data(), T(0.25), N, C,
                              -1);
    ref_cross_entropy_backward<T>(d_ref.data(), logits.data(), lse.data(), targets.data(), T(0.25),
                                  N, C, -1);
    CHECK(rel_diff(d, d_ref) < tol<T>());
  }
}

TEST_CASE(
    "softmax and cross_entropy kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  // Sizes above kParallelGrain so that the parallel branches run.
  const int64_t rows = 1050, D = 160, C = 130;
  auto x = rand_vec<float>(rows * D, 1);
  auto dout = rand_vec<float>(rows * D, 4);
  auto logits = rand_vec<float>(rows * C, 6, -6, 6);
  auto targets = rand_ids(rows, C, 7);
  for (int64_t n = 0; n < rows; n += 7) targets[n] = -100;
  auto mid = rand_vec<float>(14 * 100 * 100, 10, -3, 3);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    auto keep = [&](std::vector<float> v) { r.push_back(std::move(v)); };
    {  // softmax, last axis and middle axis, forward + backward
      std::vector<float> y(rows * D), dx(rows * D, 0.25f);
      softmax_forward<float>(y.data(), x.data(), rows, D, 1, false);
      softmax_backward<float>(dx.data(), dout.data(), y.data(), rows, D, 1, false);
      keep(y), keep(dx);
      std::vector<float> ym(mid.size()), dm(mid.size(), 0.0f);
      softmax_forward<float>(ym.data(), mid.data(), 14, 100, 100, true);
      softmax_backward<float>(dm.data(), mid.data(), ym.data(), 14, 100, 100, true);
      keep(ym), keep(dm);
    }
    {  // cross-entropy
      std::vector<float> loss(rows), lse(rows), d(rows * C, 0.0f);
      cross_entropy_forward<float>(loss.data(), lse.data(), logits.data(), targets.data(), rows, C,
                                   -100);
      cross_entropy_backward<float>(d.data(), logits.data(), lse.data(), targets.data(),
                                    1.0f / rows, rows, C, -100);
      keep(loss), keep(lse), keep(d);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

// ---- golden values from torch 1.13 --------------------------------------------------------------
// Generated offline with torch 1.13, float32 throughout; inputs are exact dyadic rationals from
// pattern() so both sides start from the same bits.

TEST_CASE("cross_entropy matches torch F.cross_entropy (value and gradient, ignored rows)") {
  // logits [4, 5] = ((k*5) % 17 − 8) / 4, targets [3, −100, 0, 4], ignore_index −100
  Tensor logits = Tensor::from_vector(pattern(20, 5, 17, 8, 4.0), {4, 5}).set_requires_grad(true);
  Tensor loss = cross_entropy(logits, Tensor::from_ids({3, -100, 0, 4}, {4}));
  CHECK(loss.dim() == 0);
  check_close({loss.item()}, {0.7454997897148132}, 1e-6);
  backward(loss);
  check_close(logits.grad().to_vector(),
              {0.0054367706179618835,
               0.01897618919610977,
               0.06623341888189316,
               -0.10215600579977036,
               0.011509641073644161,
               0.0,
               0.0,
               0.0,
               0.0,
               0.0,
               -0.15414971113204956,
               0.00892102811485529,
               0.03113744780421257,
               0.1086803674697876,
               0.005410877056419849,
               0.04512035846710205,
               0.15748554468154907,
               0.007840744219720364,
               0.027366887778043747,
               -0.2378135323524475},
              1e-6);
}

TEST_CASE("cross_entropy: every target ignored gives NaN and a zero gradient, like torch") {
  Tensor logits = Tensor::zeros({2, 3}).set_requires_grad(true);
  Tensor loss = cross_entropy(logits, Tensor::from_ids({-100, -100}, {2}));
  CHECK(std::isnan(loss.item()));
  backward(loss);
  for (double g : logits.grad().to_vector()) CHECK(g == 0.0);
}

// ---- op-level behaviour and errors --------------------------------------------------------------

TEST_CASE("cross_entropy: a target outside [0, C) that is not ignore_index throws") {
  Tensor logits = Tensor::zeros({3, 4});
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, 4, 1}, {3})),
                    doctest::Contains("target 4 at row 1 is out of range for 4 classes"));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, -1, 1}, {3})),
                    doctest::Contains("target -1"));
  CHECK_NOTHROW(cross_entropy(logits, Tensor::from_ids({0, -1, 1}, {3}), Reduction::mean, -1));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ids({0, 1}, {2})),
                    doctest::Contains("cross_entropy"));
  // uniform logits: loss = log(4)
  CHECK(cross_entropy(logits, Tensor::from_ids({0, 3, 1}, {3})).item() ==
        doctest::Approx(std::log(4.0)));
}

TEST_CASE("softmax: rows sum to one on any axis, views are handled, log_softmax = log(softmax)") {
  Tensor a = random_tensor({3, 4, 5}, 7, -3, 3, false);
  for (int64_t axis : {0, 1, 2}) {
    CAPTURE(axis);
    Tensor s = softmax(a, axis);
    Tensor total = sum(s, {axis});
    for (double v : total.to_vector()) CHECK(v == doctest::Approx(1.0).epsilon(1e-12));
    std::vector<double> ls = log_softmax(a, axis).to_vector(), sv = s.to_vector();
    for (size_t i = 0; i < sv.size(); ++i)
      CHECK(ls[i] == doctest::Approx(std::log(sv[i])).epsilon(1e-12));
  }
  // a transposed view gives the softmax of its contiguous copy
  Tensor t = dg::raw::view_transpose(a, 1, 2);
  CHECK(softmax(t, 1).to_vector() == softmax(t.contiguous(), 1).to_vector());
}
