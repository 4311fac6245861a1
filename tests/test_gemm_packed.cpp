// The packed-B GEMM (tensor/gemm_packed.h) against its references: in float32, gemm_one_thread's
// bits at a recurrent layer's step shapes on OpenBLAS's AVX-512 kernels (the depth cut included:
// K over 320 or 448), its tolerance on the other shapes (OpenBLAS runs small products on other
// kernels) and on other cores; in bf16, ref_gemm_bf16 within the float32-accumulation bound. Shapes
// with row and column tails, both layouts of B, padded leading dimensions, beta 0 (C never read)
// and 1.
#include <cblas.h>
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/gemm_kernels.h"
#include "tensor/gemm_packed.h"
#include "tensor/kernels_matmul.h"
#include "tests/kernel_test_helpers.h"

using namespace dg;

namespace {
struct Dims {
  int64_t M, N, K;
  bool step;  // an LSTM or GRU step's product (batch 32, H 256 or 512 in two pieces)
};
constexpr Dims kShapes[] = {{32, 512, 256, true},  {32, 128, 1024, true}, {32, 768, 512, true},
                            {32, 256, 1536, true}, {7, 45, 33, false},    {1, 1, 1, false},
                            {9, 33, 700, false},   {17, 96, 321, false},  {32, 64, 641, false}};

struct Problem {
  Dims s;
  bool tb;
  float beta;
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C;  // C: the initial output (NaN when beta = 0: never read)
};

Problem make_problem(Dims s, bool tb, float beta, uint64_t seed) {
  Problem p{s, tb, beta, s.K + 3, (tb ? s.K : s.N) + 5, s.N + 2, {}, {}, {}};
  p.A = random_values<float>(size_t(s.M * p.lda), seed);
  p.B = random_values<float>(size_t((tb ? s.N : s.K) * p.ldb), seed + 1);
  p.C = beta == 0.0f
            ? std::vector<float>(size_t(s.M * p.ldc), std::numeric_limits<float>::quiet_NaN())
            : random_values<float>(size_t(s.M * p.ldc), seed + 2);
  return p;
}

std::vector<float> packed_product(const Problem& p, MatmulPrecision precision) {
  const PackedB b(p.tb, p.s.K, p.s.N, p.B.data(), p.ldb, precision);
  std::vector<float> c = p.C;
  gemm_packed_b(p.s.M, p.A.data(), p.lda, b, p.beta, c.data(), p.ldc);
  return c;
}

// Σ_k |a·b| for element (i, j): the scale of the accumulation bound.
double abs_sum(const Problem& p, int64_t i, int64_t j) {
  double s = 0;
  for (int64_t k = 0; k < p.s.K; ++k)
    s += std::fabs(double(p.A[size_t(i * p.lda + k)]) *
                   double(p.tb ? p.B[size_t(j * p.ldb + k)] : p.B[size_t(k * p.ldb + j)]));
  return s;
}
}  // namespace

TEST_CASE(
    "gemm_packed_b in float32: sgemm's bits at the recurrent steps' shapes, else its tolerance") {
  select_gemm_kernels();
  const std::string core = openblas_get_corename();  // now (a test may have re-initialised it)
  const bool same_kernels = core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  uint64_t seed = 1;
  for (Dims s : kShapes)
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        const Problem p = make_problem(s, tb, beta, seed += 3);
        const std::vector<float> fast = packed_product(p, MatmulPrecision::float32);
        std::vector<float> ref = p.C;
        gemm_one_thread(false, tb, s.M, s.N, s.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, beta,
                        ref.data(), p.ldc);
        int64_t bad = 0;
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t j = 0; j < p.ldc; ++j) {
            const float f = fast[size_t(i * p.ldc + j)], r = ref[size_t(i * p.ldc + j)];
            if (j >= s.N)  // padding: untouched
              bad +=
                  std::bit_cast<uint32_t>(f) != std::bit_cast<uint32_t>(p.C[size_t(i * p.ldc + j)]);
            else if (same_kernels && s.step)
              bad += std::bit_cast<uint32_t>(f) != std::bit_cast<uint32_t>(r);
            else
              bad += !(std::fabs(f - r) <= 2 * s.K * std::ldexp(abs_sum(p, i, j), -24) + 1e-30);
          }
        INFO("M ", s.M, " N ", s.N, " K ", s.K, " trans_b ", tb, " beta ", beta, " core ", core);
        CHECK(bad == 0);
      }
}

TEST_CASE("gemm_packed_b in bf16: within float32 accumulation of ref_gemm_bf16") {
  if (!bf16_unsupported_reason().empty()) return;  // no bf16 matmuls on this CPU
  uint64_t seed = 100;
  for (Dims s : kShapes)
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        const Problem p = make_problem(s, tb, beta, seed += 3);
        const std::vector<float> fast = packed_product(p, MatmulPrecision::bf16);
        std::vector<float> ref = p.C;
        ref_gemm_bf16(false, tb, s.M, s.N, s.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, beta,
                      ref.data(), p.ldc);
        int64_t bad = 0;
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t j = 0; j < s.N; ++j) {
            const double f = fast[size_t(i * p.ldc + j)], r = ref[size_t(i * p.ldc + j)];
            const double bound = double(s.K) * std::ldexp(abs_sum(p, i, j), -23) * 1.02 +
                                 std::ldexp(std::fabs(r), -22);
            bad += !(std::fabs(f - r) <= bound);
          }
        INFO("M ", s.M, " N ", s.N, " K ", s.K, " trans_b ", tb, " beta ", beta);
        CHECK(bad == 0);
      }
}
