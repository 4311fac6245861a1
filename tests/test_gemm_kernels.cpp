// The GEMM kernel choice and the bf16 matmul precision: CPUID's reading, OpenBLAS moved onto its
// AVX-512 kernels when it had picked an AVX2 core, bf16 rounding, the bf16 GEMM against its
// reference (bf16-rounded inputs, double sums) and against float32 with stated bounds, bits that
// do not depend on the thread count, and the ops (linear, attention, the fused head's loss) in
// bf16 against float32. On a CPU without AMX-BF16 or AVX512_BF16 the bf16 cases check the refusal.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"

extern "C" {
char* openblas_get_corename(void);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
}

using namespace dg;

namespace {
std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}
uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
bool bf16_here() { return bf16_unsupported_reason().empty(); }

// Σ_k |op(A)[i,k]·op(B)[k,j]| for every (i, j): the scale of each element's rounding error.
std::vector<double> abs_products(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A,
                                 int64_t lda, const float* B, int64_t ldb) {
  std::vector<double> s(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        s[size_t(i * N + j)] += std::fabs(double(ta ? A[k * lda + i] : A[i * lda + k]) *
                                          double(tb ? B[j * ldb + k] : B[k * ldb + j]));
  return s;
}
}  // namespace

TEST_CASE("cpu_features: CPUID's reading is consistent") {
  const CpuFeatures& f = cpu_features();
  CHECK(!f.vendor.empty());
  // An extension never comes without its foundation, nor AMX data types without tiles.
  if (f.avx512bw || f.avx512dq || f.avx512vl || f.avx512_bf16) CHECK(f.avx512f);
  if (f.amx_bf16) CHECK(f.amx_tile);
  if (f.avx512f) CHECK(f.avx2);
  CHECK(!f.summary().empty());
}

TEST_CASE("select_gemm_kernels: OpenBLAS runs AVX-512 kernels on a CPU that has them") {
  const GemmKernelChoice& c = select_gemm_kernels();
  CAPTURE(c.blas_core_loaded);
  CAPTURE(c.blas_core);
  CAPTURE(c.reason);
  CHECK(c.blas_core == std::string(openblas_get_corename()));
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && cpu_features().avx512_core())
    CHECK((c.blas_core == "SkylakeX" || c.blas_core == "Cooperlake" ||
           c.blas_core == "SapphireRapids"));
}

TEST_CASE("choose_blas_core: an AVX2 pick on an AVX-512 CPU is replaced, and GEMMs stay right") {
  if (!cpu_features().avx512_core() || std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    MESSAGE("skipped: no AVX-512 here, or OPENBLAS_CORETYPE is set by the user");
    return;
  }
  // Put OpenBLAS where an older build leaves a newer CPU: its Haswell kernels.
  ::setenv("OPENBLAS_CORETYPE", "HASWELL", 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  ::unsetenv("OPENBLAS_CORETYPE");
  REQUIRE(std::string(openblas_get_corename()) == "Haswell");
  const GemmKernelChoice c = choose_blas_core();
  CHECK(c.blas_core_loaded == "Haswell");
  CHECK(c.blas_core == "SkylakeX");
  CHECK(std::string(openblas_get_corename()) == "SkylakeX");
  CHECK(std::getenv("OPENBLAS_CORETYPE") == nullptr);
  // The re-initialised library computes: one GEMM against the double reference.
  const int64_t M = 67, N = 45, K = 129;
  auto A = random_floats(size_t(M * K), 1), B = random_floats(size_t(K * N), 2);
  std::vector<float> C(size_t(M * N)), R(size_t(M * N));
  gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
  ref_gemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, R.data(), N);
  for (size_t i = 0; i < C.size(); ++i) CHECK(std::fabs(C[i] - R[i]) <= 1e-5f * K);
}

TEST_CASE("to_bf16 rounds to nearest, ties to even, and keeps NaN and infinity") {
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(to_bf16(-2.0f) == 0xc000);
  CHECK(to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // tie, lower is even: down
  CHECK(to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // tie, lower is odd: up
  CHECK(to_bf16(from_bits(0x3f808001u)) == 0x3f81);  // above the tie: up
  CHECK(to_bf16(from_bits(0x3f807fffu)) == 0x3f80);  // below the tie: down
  CHECK(to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);  // the largest float rounds to infinity
  CHECK(to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(from_bf16(to_bf16(from_bits(0x7f800001u)))));  // a NaN with a low payload
  CHECK(from_bf16(to_bf16(0.0f)) == 0.0f);
  CHECK(std::signbit(from_bf16(to_bf16(-0.0f))));
  // bf16 keeps 8 significant bits: an error of at most half a unit in the last place, 2^-8
  // relative.
  for (float x : random_floats(1000, 3))
    CHECK(std::fabs(from_bf16(to_bf16(x)) - x) <= std::ldexp(std::fabs(x), -8));
  float buf[3] = {1.0f, 3.0f, -0.5f};
  uint16_t out[3];
  to_bf16(buf, 3, out);
  CHECK((out[0] == 0x3f80 && out[1] == 0x4040 && out[2] == 0xbf00));
}

TEST_CASE("to_bf16 over arrays (the vector path) rounds every bit pattern as the scalar does") {
  // Random bit patterns cover NaNs with every payload, infinities, denormals and ties; n = 4099
  // leaves a scalar tail after the 16-wide blocks.
  std::mt19937_64 rng(7);
  std::vector<float> x(4099);
  for (float& v : x) v = from_bits(uint32_t(rng()));
  for (uint32_t special :
       {0x00000000u, 0x80000000u, 0x00008000u, 0x00018000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
        0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x3f808000u, 0x3f818000u})
    x[rng() % 4096] = from_bits(special);
  std::vector<uint16_t> wide(x.size());
  to_bf16(x.data(), int64_t(x.size()), wide.data());
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    CHECK(wide[i] == to_bf16(x[i]));
  }
}

TEST_CASE("set_matmul_precision: bf16 where the CPU has it, a clear refusal where not") {
  CHECK(matmul_precision() == MatmulPrecision::float32);
  CHECK(parse_precision("bf16") == MatmulPrecision::bf16);
  CHECK(parse_precision("float32") == MatmulPrecision::float32);
  CHECK_THROWS_WITH_AS(parse_precision("fp16", "--precision"),
                       "--precision: 'fp16' is not a precision (float32 or bf16)",
                       std::invalid_argument);
  if (!bf16_here()) {
    CHECK_THROWS_WITH_AS(set_matmul_precision(MatmulPrecision::bf16),
                         bf16_unsupported_reason().c_str(), std::runtime_error);
    CHECK(matmul_precision() == MatmulPrecision::float32);
    CHECK(bf16_kernel_name().empty());
    return;
  }
  CHECK(bf16_kernel_name().rfind("ref", 0) != 0);  // a real kernel, not oneDNN's reference
  {
    MatmulPrecisionScope scope(MatmulPrecision::bf16);
    CHECK(matmul_precision() == MatmulPrecision::bf16);
  }
  CHECK(matmul_precision() == MatmulPrecision::float32);
}

TEST_CASE("gemm_bf16_one_thread matches its reference for every transpose, alpha and beta") {
  if (!bf16_here()) return;
  const int64_t M = 37, N = 53, K = 71, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto scales : {std::pair{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}}) {
        const float alpha = scales.first, beta = scales.second;  // plain names: CAPTURE takes them
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(alpha);
        CAPTURE(beta);
        const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
        auto A = random_floats(size_t((ta ? K : M) * lda), 11);
        auto B = random_floats(size_t((tb ? N : K) * ldb), 12);
        auto C0 = random_floats(size_t(M * ldc), 13);
        std::vector<float> fast = C0, ref = C0;
        gemm_bf16_one_thread(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta,
                             fast.data(), ldc);
        ref_gemm_bf16(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, ref.data(), ldc);
        // float32 accumulation of bf16 products: K·2^-23 of the sum of |products| (the inputs
        // here are bf16 values after rounding, so the products are exact in float32).
        auto scale = abs_products(ta, tb, M, N, K, A.data(), lda, B.data(), ldb);
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            const double bound = double(K) * std::ldexp(1.0, -23) * std::fabs(alpha) *
                                     scale[size_t(i * N + j)] * 1.02 +
                                 std::ldexp(std::fabs(double(ref[size_t(i * ldc + j)])), -22);
            CHECK(std::fabs(double(fast[size_t(i * ldc + j)]) - ref[size_t(i * ldc + j)]) <= bound);
          }
        for (int64_t i = 0; i < M; ++i)  // the padding of C is untouched
          for (int64_t j = N; j < ldc; ++j)
            CHECK(bits(fast[size_t(i * ldc + j)]) == bits(C0[size_t(i * ldc + j)]));
      }
}

TEST_CASE(
    "gemm in bf16 precision: within bf16's rounding of float32, same bits at any thread count") {
  if (!bf16_here()) return;
  // Large enough to be cut into pieces (gemm_pieces), both along M and along N.
  for (auto shape : {std::tuple<int64_t, int64_t, int64_t>{512, 96, 200}, {64, 700, 130}}) {
    const int64_t M = std::get<0>(shape), N = std::get<1>(shape), K = std::get<2>(shape);
    CAPTURE(M);
    CAPTURE(N);
    auto A = random_floats(size_t(M * K), 21), B = random_floats(size_t(N * K), 22);
    std::vector<float> f32(size_t(M * N));
    gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, f32.data(), N);
    std::vector<float> one(size_t(M * N)), two(size_t(M * N));
    const int threads_before = threads();
    {
      MatmulPrecisionScope scope(MatmulPrecision::bf16);
      set_threads(1);
      gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, one.data(), N);
      set_threads(2);
      gemm(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, two.data(), N);
    }
    set_threads(threads_before);
    CHECK(std::memcmp(one.data(), two.data(), one.size() * 4) == 0);
    // Each input rounds by at most 2^-8 relative, so each product by at most 2^-7 (+ 2^-16):
    // |bf16 − float32| ≤ 2^-7 · 1.01 · Σ|a·b| + float32's own accumulation error.
    auto scale = abs_products(false, true, M, N, K, A.data(), K, B.data(), K);
    for (size_t i = 0; i < one.size(); ++i) {
      const double bound = std::ldexp(scale[i], -7) * 1.01 + 2.0 * K * std::ldexp(scale[i], -24);
      CHECK(std::fabs(double(one[i]) - double(f32[i])) <= bound);
    }
    // And bf16 is not float32 in disguise: some element differs.
    CHECK(std::memcmp(one.data(), f32.data(), one.size() * 4) != 0);
  }
}

TEST_CASE("causal attention in bf16 precision: long heads take bf16, within its error") {
  if (!bf16_here()) return;
  // T = 1024, hd = 64: the last 64-row blocks multiply 64 × 1024 × 64 ≥ kBf16OneThreadMinWork.
  Tensor q = random_tensor({1, 1, 1024, 64}, 41, -1, 1, false).to(DType::f32);
  Tensor k = random_tensor({1, 1, 1024, 64}, 42, -1, 1, false).to(DType::f32);
  Tensor v = random_tensor({1, 1, 1024, 64}, 43, -1, 1, false).to(DType::f32);
  REQUIRE(64 * 1024 * 64 >= kBf16OneThreadMinWork);
  std::vector<double> a32 = causal_attention(q, k, v).to_vector(), a16;
  {
    MatmulPrecisionScope scope(MatmulPrecision::bf16);
    a16 = causal_attention(q, k, v).to_vector();
  }
  double da = 0;
  for (size_t i = 0; i < a32.size(); ++i) da = std::max(da, std::fabs(a16[i] - a32[i]));
  CAPTURE(da);
  CHECK(da > 0.0);
  // Scores err by ≤ 64·2^-7/8 = 0.0625 (|q·k| ≤ 64 at scale 1/8), so the softmax weights by at
  // most ~13% relative, and the output (a weighted mean of v in [-1, 1]) by less than 0.13.
  CHECK(da <= 0.13);
}

TEST_CASE(
    "ops in bf16 precision: linear, causal attention and the fused head's loss near float32") {
  if (!bf16_here()) return;
  Tensor x = random_tensor({4, 16, 48}, 31, -1, 1, false).to(DType::f32);
  Tensor w = random_tensor({40, 48}, 32, -0.2, 0.2, false).to(DType::f32);
  Tensor q = random_tensor({2, 4, 24, 16}, 33, -1, 1, false).to(DType::f32);
  Tensor k = random_tensor({2, 4, 24, 16}, 34, -1, 1, false).to(DType::f32);
  Tensor v = random_tensor({2, 4, 24, 16}, 35, -1, 1, false).to(DType::f32);
  Tensor targets = Tensor::from_vector(std::vector<double>(64, 3.0), {64}, DType::i32);
  auto run = [&](MatmulPrecision p) {
    MatmulPrecisionScope scope(p);
    Tensor y = linear(x, w);
    Tensor a = causal_attention(q, k, v);
    Tensor l = linear_cross_entropy(reshape(x, {64, 48}), w, targets);
    return std::tuple{y.to_vector(), a.to_vector(), l.item()};
  };
  auto [y32, a32, l32] = run(MatmulPrecision::float32);
  auto [y16, a16, l16] = run(MatmulPrecision::bf16);
  auto max_diff = [](const std::vector<double>& p, const std::vector<double>& q) {
    double m = 0;
    for (size_t i = 0; i < p.size(); ++i) m = std::max(m, std::fabs(p[i] - q[i]));
    return m;
  };
  // |y| ≤ Σ|x·w| ≤ 48 · 0.2 here; bf16 inputs err by 2^-7 of that at most: 0.075.
  const double dy = max_diff(y16, y32), da = max_diff(a16, a32);
  CAPTURE(dy);
  CAPTURE(da);
  CHECK(dy > 0.0);
  CHECK(dy <= 48 * 0.2 * std::ldexp(1.0, -7));
  CHECK(da == 0.0);  // heads this small stay float32 (24 × 24 × 16 is below the small bf16
                     // kernel's kBf16SmallMinWork: gemm_bf16_small_suits)
  CHECK(std::fabs(l16 - l32) <= 0.02 * std::fabs(l32));
}
