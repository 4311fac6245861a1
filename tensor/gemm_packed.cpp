// The packed-B GEMM (see gemm_packed.h): B laid out once in panels of 32 columns, then a
// register-blocked microkernel (8 rows × 32 columns in 16 accumulators) over each panel, in
// float32 (FMA chains) or bf16 (VDPBF16PS on pair words). The AVX-512 functions carry their own
// target attribute, so the file builds without -march flags.
#include "tensor/gemm_packed.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tensor/avx512_lanes.h"
#include "tensor/cpu_features.h"
#include "tensor/kernels_matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DG_F32_TARGET __attribute__((target("avx512f")))
#define DG_BF16_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
#endif

namespace dg {

void PackedB::Free::operator()(void* p) const { std::free(p); }

namespace {
constexpr int64_t kPanel = PackedB::kPanel;
constexpr int kRows = 8;  // rows of C per microkernel call

bool kernel_runs(MatmulPrecision precision) {
#if defined(__x86_64__)
  const CpuFeatures& f = cpu_features();
  if (precision == MatmulPrecision::bf16) return f.avx512_bf16 && f.avx512f && f.avx512bw;
  return f.avx512f;
#else
  (void)precision;
  return false;
#endif
}

// SGEMM_Q of the OpenBLAS core running now (0.3.21, found by matching its bits: 448 on SkylakeX,
// 320 on Cooperlake and SapphireRapids; a test re-initialises OpenBLAS on another core, so it is
// read when B is packed, not once).
int64_t blas_depth() { return std::strcmp(openblas_get_corename(), "SkylakeX") == 0 ? 448 : 320; }

// Element (k, j) of op(B).
inline float element(bool tb, const float* B, int64_t ldb, int64_t k, int64_t j) {
  return tb ? B[j * ldb + k] : B[k * ldb + j];
}

// float32: panel q holds op(B)[k][32q + c] at (q·K + k)·32 + c; columns past N are zero.
void pack_f32(bool tb, int64_t K, int64_t N, const float* B, int64_t ldb, float* out) {
  for (int64_t q = 0; q * kPanel < N; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t j = q * kPanel + c;
        out[(q * K + k) * kPanel + c] = j < N ? element(tb, B, ldb, k, j) : 0.0f;
      }
}

// bf16: pair word (p, j) holds to_bf16 of op(B)[2p][j] in its low half and of op(B)[2p + 1][j]
// in its high half (zero past K), the layout VDPBF16PS multiplies; panels as float32's.
void pack_bf16_pairs(bool tb, int64_t K, int64_t N, const float* B, int64_t ldb, uint32_t* out) {
  const int64_t Kp = (K + 1) / 2;
  for (int64_t q = 0; q * kPanel < N; ++q)
    for (int64_t p = 0; p < Kp; ++p)
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t j = q * kPanel + c;
        uint32_t word = 0;
        if (j < N) {
          word = to_bf16(element(tb, B, ldb, 2 * p, j));
          if (2 * p + 1 < K) word |= uint32_t(to_bf16(element(tb, B, ldb, 2 * p + 1, j))) << 16;
        }
        out[(q * Kp + p) * kPanel + c] = word;
      }
}

#if defined(__x86_64__)
// C [R, cols] (cols ≤ 32) = beta · C + acc, acc [R][2] the block's sums.
template <int R>
DG_F32_TARGET inline void store_block(__m512 (&acc)[R][2], int64_t cols, float beta, float* C,
                                      int64_t ldc) {
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float* c = C + r * ldc + 16 * v;
      const __mmask16 m = first_lanes(cols - 16 * v);
      __m512 x = acc[r][v];  // beta·C rounded, then the sums added (OpenBLAS's order)
      if (beta != 0.0f) x = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, c), vb), x);
      _mm512_mask_storeu_ps(c, m, x);
    }
}

// float32: C [R, cols] = A [R, K] (row stride lda) · panel [K, 32] + beta · C; each k broadcasts
// one A element per row into both of the panel's vectors (one FMA chain per element, k in order).
template <int R>
DG_F32_TARGET void f32_block(int64_t K, const float* A, int64_t lda, const float* panel,
                             int64_t cols, float beta, float* C, int64_t ldc) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_load_ps(panel + k * kPanel);
    const __m512 b1 = _mm512_load_ps(panel + k * kPanel + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + k]);
      acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  store_block<R>(acc, cols, beta, C, ldc);
}

// bf16: as f32_block over Kp pair words (A's row r at A + r·lda, pairs adjacent); each pair
// broadcasts one A word per row and multiplies it into both vectors (VDPBF16PS).
template <int R>
DG_BF16_TARGET void bf16_block(int64_t Kp, const uint32_t* A, int64_t lda, const uint32_t* panel,
                               int64_t cols, float beta, float* C, int64_t ldc) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < Kp; ++p) {
    const __m512i b0 = _mm512_load_si512(panel + p * kPanel);
    const __m512i b1 = _mm512_load_si512(panel + p * kPanel + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i a = _mm512_set1_epi32(int(A[r * lda + p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)a, (__m512bh)b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)a, (__m512bh)b1);
    }
  }
  store_block<R>(acc, cols, beta, C, ldc);
}

template <class Word>
using Block = void (*)(int64_t, const Word*, int64_t, const Word*, int64_t, float, float*, int64_t);
template <int... R>
Block<float> f32_blocks(int rows, std::integer_sequence<int, R...>) {
  constexpr Block<float> table[] = {f32_block<R + 1>...};
  return table[rows - 1];
}
template <int... R>
Block<uint32_t> bf16_blocks(int rows, std::integer_sequence<int, R...>) {
  constexpr Block<uint32_t> table[] = {bf16_block<R + 1>...};
  return table[rows - 1];
}

// C [M, N] over panels (outer: a panel comes from memory once and its row blocks reuse it) and
// blocks of kRows rows, for the depth [k0, k0 + depth) of A and of each panel (rows of `width`
// words).
template <class Word, class Pick>
void run_blocks(int64_t M, int64_t N, int64_t k0, int64_t depth, int64_t width, const Word* A,
                int64_t lda, const Word* panels, float beta, float* C, int64_t ldc,
                const Pick& pick) {
  for (int64_t j = 0; j < N; j += kPanel) {
    const Word* panel = panels + (j * width + k0 * kPanel);  // panel j/32 at (j/32)·width·32
    const int64_t cols = std::min(kPanel, N - j);
    for (int64_t i = 0; i < M; i += kRows) {
      const int rows = int(std::min<int64_t>(kRows, M - i));
      pick(rows)(depth, A + i * lda + k0, lda, panel, cols, beta, C + i * ldc + j, ldc);
    }
  }
}

// OpenBLAS's level-3 driver cuts K into blocks of at most its SGEMM_Q (`depth`), halving a
// remainder between one and two blocks (rounded up to 16), and adds each block's sums into C in
// turn. float32 cuts K the same way, so on those kernels its bits are sgemm's
// (tests/test_gemm_packed.cpp compares them).
int64_t next_depth_block(int64_t remaining, int64_t depth) {
  if (remaining >= 2 * depth) return depth;
  if (remaining > depth) return (remaining / 2 + 15) / 16 * 16;
  return remaining;
}
#endif
}  // namespace

PackedB::PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                 MatmulPrecision precision)
    : K_(K),
      N_(N),
      blas_depth_(blas_depth()),
      precision_(precision),
      kernel_(K > 0 && N > 0 && kernel_runs(precision)) {
  if (!kernel_) {
    plain_.resize(size_t(K * N));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) plain_[size_t(k * N + j)] = element(trans_b, B, ldb, k, j);
    return;
  }
  const int64_t panels = (N + kPanel - 1) / kPanel;
  const int64_t depth = precision == MatmulPrecision::bf16 ? (K + 1) / 2 : K;
  panels_.reset(std::aligned_alloc(64, size_t(panels * depth * kPanel * 4)));
  if (!panels_) throw std::bad_alloc();
  if (precision == MatmulPrecision::bf16)
    pack_bf16_pairs(trans_b, K, N, B, ldb, static_cast<uint32_t*>(panels_.get()));
  else
    pack_f32(trans_b, K, N, B, ldb, static_cast<float*>(panels_.get()));
}

void gemm_packed_b(int64_t M, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                   int64_t ldc) {
  const int64_t K = B.K_, N = B.N_;
  if (M <= 0 || N <= 0) return;
  const bool bf16 = B.precision_ == MatmulPrecision::bf16;
  if (!B.kernel_) {
    const float* b = B.plain_.data();
    if (bf16 && K > 0)  // (K = 0: gemm_one_thread scales C)
      return gemm_bf16_one_thread(false, false, M, N, K, 1.0f, A, lda, b, N, beta, C, ldc);
    return gemm_one_thread(false, false, M, N, K, 1.0f, A, lda, b, N, beta, C, ldc);
  }
#if defined(__x86_64__)
  if (!bf16) {
    const auto pick = [](int rows) {
      return f32_blocks(rows, std::make_integer_sequence<int, kRows>());
    };
    const float* panels = static_cast<const float*>(B.panels_.get());
    for (int64_t k0 = 0, depth = 0; k0 < K; k0 += depth) {
      depth = next_depth_block(K - k0, B.blas_depth_);
      run_blocks(M, N, k0, depth, K, A, lda, panels, k0 == 0 ? beta : 1.0f, C, ldc, pick);
    }
    return;
  }
  // A's rows rounded to bf16 pair words, a row's pairs adjacent (an odd K's last high half zero).
  const int64_t Kp = (K + 1) / 2;
  thread_local std::vector<uint32_t> a_pairs;
  if (int64_t(a_pairs.size()) < M * Kp) a_pairs.resize(size_t(M * Kp));
  for (int64_t i = 0; i < M; ++i) {
    a_pairs[size_t(i * Kp + Kp - 1)] = 0;
    to_bf16(A + i * lda, K, reinterpret_cast<uint16_t*>(a_pairs.data() + i * Kp));
  }
  const auto pick = [](int rows) {
    return bf16_blocks(rows, std::make_integer_sequence<int, kRows>());
  };
  run_blocks(M, N, 0, Kp, Kp, a_pairs.data(), Kp, static_cast<const uint32_t*>(B.panels_.get()),
             beta, C, ldc, pick);
#endif
}

}  // namespace dg
