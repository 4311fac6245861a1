// The small bf16 GEMM (tensor/gemm_bf16_small.h) against its reference ref_gemm_bf16 over many
// shapes, transposes, leading dimensions, alphas and betas; NaN, infinity and the documented
// flushing of denormals; the dispatch decision (and the refusal on a CPU without AVX512_BF16);
// gemm_one_thread's choice bit for bit in both precisions; and causal attention in bf16 precision
// (same bits at 1 and 2 threads, near float32). Without AVX512_BF16 only the decision runs.
#include <cblas.h>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"

using namespace dg;

namespace {
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

struct Problem {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> A, B, C;  // C: the initial output (NaN everywhere when beta = 0)
};

Problem make_problem(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad, float alpha,
                     float beta, uint64_t seed) {
  Problem p{ta,    tb,   M,  N,  K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad,
            alpha, beta, {}, {}, {}};
  p.A = random_values<float>(size_t((ta ? K : M) * p.lda), seed);
  p.B = random_values<float>(size_t((tb ? N : K) * p.ldb), seed + 1);
  p.C = beta == 0.0f
            ? std::vector<float>(size_t(M * p.ldc), std::numeric_limits<float>::quiet_NaN())
            : random_values<float>(size_t(M * p.ldc), seed + 2);
  return p;
}

// Checks gemm_bf16_small against ref_gemm_bf16 within gemm_bf16_small.h's bound: K · 2^-23 ·
// |alpha| · Σ|a·b| (with 2% for the bf16 rounding of the factors the sum is taken over) plus
// 2^-22 of the result for beta · C's rounding; C's padding columns stay as they were.
void check_against_reference(const Problem& p) {
  std::vector<float> fast = p.C, ref = p.C;
  gemm_bf16_small(p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.A.data(), p.lda, p.B.data(), p.ldb, p.beta,
                  fast.data(), p.ldc);
  ref_gemm_bf16(p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.A.data(), p.lda, p.B.data(), p.ldb, p.beta,
                ref.data(), p.ldc);
  int64_t bad = 0;
  for (int64_t i = 0; i < p.M; ++i) {
    for (int64_t j = 0; j < p.N; ++j) {
      double scale = 0;
      for (int64_t k = 0; k < p.K; ++k)
        scale += std::fabs(double(p.ta ? p.A[size_t(k * p.lda + i)] : p.A[size_t(i * p.lda + k)]) *
                           double(p.tb ? p.B[size_t(j * p.ldb + k)] : p.B[size_t(k * p.ldb + j)]));
      const double r = ref[size_t(i * p.ldc + j)], f = fast[size_t(i * p.ldc + j)];
      const double bound = double(p.K) * std::ldexp(1.0, -23) * std::fabs(p.alpha) * scale * 1.02 +
                           std::ldexp(std::fabs(r), -22);
      if (!(std::fabs(f - r) <= bound)) ++bad;  // NaN counts as bad
    }
    for (int64_t j = p.N; j < p.ldc; ++j)
      if (bits(fast[size_t(i * p.ldc + j)]) != bits(p.C[size_t(i * p.ldc + j)])) ++bad;
  }
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("gemm_bf16_small_suits: the dispatch rule, and no kernel without AVX512_BF16") {
  CHECK(gemm_bf16_small_suits(64, 256, 32, true));         // attention's QKᵀ at head size 32
  CHECK(gemm_bf16_small_suits(256, 32, 64, true));         // Pᵀ·dO
  CHECK(gemm_bf16_small_suits(64, 256, 16, true));         // QKᵀ at head size 16
  CHECK(gemm_bf16_small_suits(64, 64, 32, true));          // exactly kBf16SmallMinWork
  CHECK_FALSE(gemm_bf16_small_suits(64, 256, 32, false));  // a CPU without the instructions
  CHECK_FALSE(gemm_bf16_small_suits(64, 256, 8, true));    // K below kBf16SmallMinK
  CHECK_FALSE(gemm_bf16_small_suits(64, 16, 256, true));   // N below kBf16SmallMinN (P·V, hd 16)
  CHECK_FALSE(gemm_bf16_small_suits(64, 32, 32, true));    // below kBf16SmallMinWork
  CHECK_FALSE(gemm_bf16_small_suits(64, 1024, 64, true));  // oneDNN's (kBf16OneThreadMinWork)
  if (!gemm_bf16_small_available()) {
    std::vector<float> a(4, 1.0f), c(4);
    CHECK_THROWS_WITH_AS(
        gemm_bf16_small(false, false, 2, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(), 2),
        doctest::Contains("gemm_bf16_small: this CPU lacks AVX512_BF16"), std::runtime_error);
  }
}

TEST_CASE("gemm_bf16_small matches ref_gemm_bf16: chosen shapes and tails") {
  if (!gemm_bf16_small_available()) return;
  // M = 1, N below, at and past 16 and 32, K odd and even (an odd K's zero pair half), K = 0
  // (C = beta · C), K past one 16-pair tile of the transposing pack.
  const int64_t shapes[][3] = {{1, 1, 1},   {1, 5, 3},   {3, 16, 2},   {9, 17, 7},    {5, 7, 0},
                               {8, 32, 64}, {17, 33, 1}, {64, 64, 33}, {70, 100, 129}};
  uint64_t seed = 100;
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto scales : {std::pair{1.0f, 0.0f}, {-2.0f, 0.0f}, {0.5f, 1.0f}, {1.0f, -0.25f}}) {
          const int64_t M = s[0], N = s[1], K = s[2];
          const float alpha = scales.first, beta = scales.second;
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(ta);
          CAPTURE(tb);
          CAPTURE(alpha);
          CAPTURE(beta);
          check_against_reference(make_problem(ta, tb, M, N, K, seed % 4, alpha, beta, seed));
          seed += 3;
        }
}

TEST_CASE("gemm_bf16_small matches ref_gemm_bf16: random shapes and leading dimensions") {
  if (!gemm_bf16_small_available()) return;
  std::mt19937_64 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 200; ++trial) {
    const bool ta = pick(0, 1), tb = pick(0, 1);
    const int64_t M = pick(1, 80), N = pick(1, 90), K = pick(1, 150), pad = pick(0, 5);
    const float alphas[] = {1.0f, 0.5f, -3.0f}, betas[] = {0.0f, 1.0f, 0.75f};
    const float alpha = alphas[pick(0, 2)], beta = betas[pick(0, 2)];
    CAPTURE(trial);
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    CAPTURE(ta);
    CAPTURE(tb);
    check_against_reference(make_problem(ta, tb, M, N, K, pad, alpha, beta, 1000 + trial));
  }
}

TEST_CASE("gemm_bf16_small: NaN and infinity propagate as in the reference") {
  if (!gemm_bf16_small_available()) return;
  const float inf = std::numeric_limits<float>::infinity();
  for (bool tb : {false, true}) {
    Problem p = make_problem(false, tb, 9, 40, 21, 1, 1.0f, 0.0f, 77);
    p.A[size_t(2 * p.lda + 5)] = std::numeric_limits<float>::quiet_NaN();  // row 2: all NaN
    p.A[size_t(4 * p.lda + 3)] = inf;                                      // row 4: ±inf
    p.A[size_t(6 * p.lda + 0)] = inf;                                      // row 6: inf and -inf
    p.A[size_t(6 * p.lda + 1)] = -inf;  // where B's two entries share a sign: NaN
    std::vector<float> fast = p.C, ref = p.C;
    gemm_bf16_small(false, tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                    fast.data(), p.ldc);
    ref_gemm_bf16(false, tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                  ref.data(), p.ldc);
    int64_t nan = 0, infinite = 0;
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        const float f = fast[size_t(i * p.ldc + j)], r = ref[size_t(i * p.ldc + j)];
        CHECK(std::isnan(f) == std::isnan(r));
        if (std::isinf(r)) CHECK(f == r);
        nan += std::isnan(r), infinite += std::isinf(r);
      }
    CHECK(nan >= p.N);  // row 2 at least
    CHECK(infinite > 0);
  }
}

TEST_CASE("gemm_bf16_small: denormal factors count as zero (VDPBF16PS), unlike the reference") {
  if (!gemm_bf16_small_available()) return;
  const float a = 1e-39f, b = 1e30f;  // a is denormal in float32 and in bf16
  REQUIRE(std::fpclassify(from_bf16(to_bf16(a))) == FP_SUBNORMAL);
  float fast = 5.0f, ref = 5.0f;
  gemm_bf16_small(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &fast, 1);
  ref_gemm_bf16(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &ref, 1);
  CHECK(fast == 0.0f);
  CHECK(ref == doctest::Approx(1e-9).epsilon(0.01));
}

TEST_CASE("gemm_one_thread: float32 precision is sgemm bit for bit, bf16 takes the small kernel") {
  // Attention's three transpose cases at head size 32 and 8, a 64-row block against 256 keys.
  for (int64_t hd : {8, 32}) {
    const int64_t cases[][5] = {{0, 1, 64, 256, hd}, {0, 0, 64, hd, 256}, {1, 0, 256, hd, 64}};
    for (const auto& c : cases) {
      const bool ta = c[0], tb = c[1];
      const int64_t M = c[2], N = c[3], K = c[4];
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      CAPTURE(M);
      CAPTURE(N);
      CAPTURE(K);
      auto A = random_values<float>(size_t(M * K), 5), B = random_values<float>(size_t(K * N), 6);
      std::vector<float> blas(size_t(M * N)), got(size_t(M * N)), expected(size_t(M * N));
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  int(M), int(N), int(K), 0.5f, A.data(), int(lda), B.data(), int(ldb), 0.0f,
                  blas.data(), int(N));
      gemm_one_thread(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.0f, got.data(), N);
      CHECK(std::memcmp(got.data(), blas.data(), got.size() * 4) == 0);
      if (!bf16_unsupported_reason().empty()) continue;
      const bool small = gemm_bf16_small_suits(M, N, K, gemm_bf16_small_available());
      CHECK(small == (hd == 32 && gemm_bf16_small_available()));
      if (small)
        gemm_bf16_small(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.0f, expected.data(),
                        N);
      else
        expected = blas;
      MatmulPrecisionScope scope(MatmulPrecision::bf16);
      gemm_one_thread(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 0.0f, got.data(), N);
      CHECK(std::memcmp(got.data(), expected.data(), got.size() * 4) == 0);
    }
  }
}

TEST_CASE(
    "causal attention in bf16 precision through the small kernel: thread bits, near float32") {
  if (!gemm_bf16_small_available() || !bf16_unsupported_reason().empty()) return;
  // T = 256, hd = 32: every per-head product is below kBf16OneThreadMinWork and suits the kernel.
  REQUIRE(gemm_bf16_small_suits(64, 256, 32, true));
  Tensor q = random_tensor({2, 4, 256, 32}, 51, -1, 1, false).to(DType::f32);
  Tensor k = random_tensor({2, 4, 256, 32}, 52, -1, 1, false).to(DType::f32);
  Tensor v = random_tensor({2, 4, 256, 32}, 53, -1, 1, false).to(DType::f32);
  Tensor w = random_tensor({2, 4, 256, 32}, 54, -1, 1, false).to(DType::f32);
  // out, dq, dk, dv of Σ w · attention(q, k, v).
  auto run = [&](MatmulPrecision precision, int thread_count) {
    MatmulPrecisionScope scope(precision);
    const int before = threads();
    set_threads(thread_count);
    Tensor qq = dg::raw::clone(q), kk = dg::raw::clone(k), vv = dg::raw::clone(v);
    for (Tensor* t : {&qq, &kk, &vv}) t->set_requires_grad(true);
    Tensor out = causal_attention(qq, kk, vv);
    backward(sum(mul(out, w)));
    set_threads(before);
    return std::vector<std::vector<double>>{out.to_vector(), qq.grad().to_vector(),
                                            kk.grad().to_vector(), vv.grad().to_vector()};
  };
  const auto one = run(MatmulPrecision::bf16, 1), two = run(MatmulPrecision::bf16, 2);
  const auto f32 = run(MatmulPrecision::float32, 1);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t t = 0; t < one.size(); ++t) {
    const std::string name = names[t];
    CAPTURE(name);
    CHECK(one[t] == two[t]);  // doubles converted from float32: equal values are equal bits
    double diff = 0, largest = 0;
    for (size_t i = 0; i < one[t].size(); ++i) {
      diff = std::max(diff, std::fabs(one[t][i] - f32[t][i]));
      largest = std::max(largest, std::fabs(f32[t][i]));
    }
    CAPTURE(diff);
    CAPTURE(largest);
    CHECK(diff > 0.0);  // bf16, not float32 in disguise
    // The output: scores err by at most 32 · 2^-7 / √32 = 0.044 (|q·k| ≤ 32, each bf16 product
    // within 2^-7), so softmax weights by at most 9% relative, and P·V adds 2^-7 more: the output
    // (a weighted mean of v in [-1, 1]) moves by less than 0.1. Gradients: the same relative
    // errors through two more products each; 2% of the largest gradient (measured: under 0.5%,
    // and 0.003 for the output).
    CHECK(diff <= (t == 0 ? 0.1 : 0.02 * largest));
  }
}
