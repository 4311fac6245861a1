// The small bf16 GEMM on VDPBF16PS (see gemm_bf16_small.h): operands rounded and packed into K
// pairs, a register-blocked microkernel (8 × 32 or 16 × 16), masked tails. The AVX-512 functions
// carry their own target attribute, so the file builds without -march flags; its reference is
// dg::ref_gemm_bf16 (tensor/gemm_kernels.cpp).
#include "tensor/gemm_bf16_small.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tensor/avx512_lanes.h"
#include "tensor/cpu_features.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DG_BF16_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
#endif

namespace dg {

bool gemm_bf16_small_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx512_bf16 && f.avx512f && f.avx512bw && f.avx512vl;
}

const char* gemm_bf16_small_name() {
  return "avx512_bf16 dot products (8 × 32 and 16 × 16 register blocks)";
}

bool gemm_bf16_small_suits(int64_t M, int64_t N, int64_t K, bool cpu_has_kernel) {
  const int64_t work = M * N * K;
  return cpu_has_kernel && K >= kBf16SmallMinK && N >= kBf16SmallMinN &&
         work >= kBf16SmallMinWork && work < kBf16OneThreadMinWork;
}

#if defined(__x86_64__)
namespace {
// A pair word holds two bf16 values of neighbouring k: k = 2p in its low half, k = 2p + 1 in its
// high half, the layout VDPBF16PS multiplies pairwise. Kp = ceil(K / 2); an odd K's last pair
// has a zero high half.

// A microkernel call computes a block of C in 16 accumulator registers: 8 rows × 32 columns (two
// vectors of 16 floats), or, for a last block of at most 16 columns, 16 rows × 16 (one vector:
// 8 rows alone left too few independent dot products in flight for N = 16).
constexpr int kColumns = 32;
constexpr int rows_per_block(int vectors) { return vectors == 2 ? 8 : 16; }

// Shifts of all 16 lanes by 16 bits (the maskz forms: GCC 12 warns that the plain ones read an
// undefined input once inlined after a masked load).
DG_BF16_TARGET __m512i high_half(__m512i u) { return _mm512_maskz_srli_epi32(0xffff, u, 16); }
DG_BF16_TARGET __m512i to_high_half(__m512i u) { return _mm512_maskz_slli_epi32(0xffff, u, 16); }

// 16 floats (as bits) → each one's dg::to_bf16 in the low half of its 32-bit lane, bit for bit:
// round to nearest even by adding 0x7fff plus the lowest kept bit; a NaN is kept, made quiet.
DG_BF16_TARGET __m512i bf16_in_lanes(__m512i u) {
  const __m512i lsb = _mm512_and_si512(high_half(u), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
  const __m512i rounded = high_half(_mm512_add_epi32(u, bias));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(high_half(u), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

// src [K, width] (row stride ld, k along rows) → dst [Kp, dst_ld] pair words, columns from width
// to dst_ld zero. For B as stored, and for a transposed A ([K, M] stored).
DG_BF16_TARGET void pack_pairs_from_rows(const float* src, int64_t ld, int64_t K, int64_t width,
                                         uint32_t* dst, int64_t dst_ld) {
  for (int64_t p = 0; p < (K + 1) / 2; ++p) {
    const float* even = src + 2 * p * ld;
    const float* odd = 2 * p + 1 < K ? even + ld : nullptr;
    for (int64_t c = 0; c < dst_ld; c += 16) {
      const __mmask16 in = first_lanes(width - c);
      const __m512i lo = bf16_in_lanes(_mm512_maskz_loadu_epi32(in, even + c));
      const __m512i hi =
          odd ? bf16_in_lanes(_mm512_maskz_loadu_epi32(in, odd + c)) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + p * dst_ld + c, first_lanes(dst_ld - c),
                               _mm512_or_si512(lo, to_high_half(hi)));
    }
  }
}

// r [16, 16] 32-bit words → its transpose, in registers: 32-bit then 64-bit interleaves within
// 128-bit lanes, then two rounds of 128-bit lane shuffles. (The maskz forms: see high_half.)
DG_BF16_TARGET void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // t[i], t[i+1]: rows i, i+1 interleaved
    t[i] = _mm512_maskz_unpacklo_epi32(0xffff, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(0xffff, r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // r[g + e], lane L: rows g..g+3 of column 4L + e
    r[g] = _mm512_maskz_unpacklo_epi64(0xff, t[g], t[g + 2]);
    r[g + 1] = _mm512_maskz_unpackhi_epi64(0xff, t[g], t[g + 2]);
    r[g + 2] = _mm512_maskz_unpacklo_epi64(0xff, t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_maskz_unpackhi_epi64(0xff, t[g + 1], t[g + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // gather lane L of r[e], r[4+e], r[8+e], r[12+e] into t[4L+e]
    const __m512i v0 = _mm512_maskz_shuffle_i32x4(0xffff, r[e], r[4 + e], 0x88);
    const __m512i v1 = _mm512_maskz_shuffle_i32x4(0xffff, r[e], r[4 + e], 0xdd);
    const __m512i v2 = _mm512_maskz_shuffle_i32x4(0xffff, r[8 + e], r[12 + e], 0x88);
    const __m512i v3 = _mm512_maskz_shuffle_i32x4(0xffff, r[8 + e], r[12 + e], 0xdd);
    t[e] = _mm512_maskz_shuffle_i32x4(0xffff, v0, v2, 0x88);
    t[4 + e] = _mm512_maskz_shuffle_i32x4(0xffff, v1, v3, 0x88);
    t[8 + e] = _mm512_maskz_shuffle_i32x4(0xffff, v0, v2, 0xdd);
    t[12 + e] = _mm512_maskz_shuffle_i32x4(0xffff, v1, v3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// src [width, K] (row stride ld, k along columns) → dst [Kp, dst_ld] pair words (dst_ld = width
// rounded up to 16), columns from width to dst_ld zero. For a transposed B ([N, K] stored:
// attention's Kᵀ and Vᵀ). Tiles of 16 rows × 16 pairs: each row's 32 floats rounded to 16 pair
// words in a register, the tile transposed in registers, each pair's 16 words stored whole.
// (Writing dst a word at a time, Kp rows apart, ran at a third of the speed; gathers were slower.)
DG_BF16_TARGET void pack_pairs_from_columns(const float* src, int64_t ld, int64_t K, int64_t width,
                                            uint32_t* dst, int64_t dst_ld) {
  const int64_t Kp = (K + 1) / 2;
  alignas(64) int16_t low_halves[32];  // the low half of each 32-bit lane of two vectors
  for (int i = 0; i < 32; ++i) low_halves[i] = int16_t(2 * i);
  const __m512i pick = _mm512_load_si512(low_halves);
  for (int64_t c = 0; c < width; c += 16)
    for (int64_t p0 = 0; p0 < Kp; p0 += 16) {
      const __mmask16 k_lo = first_lanes(K - 2 * p0), k_hi = first_lanes(K - 2 * p0 - 16);
      __m512i tile[16];
      for (int64_t l = 0; l < 16; ++l) {
        if (c + l >= width) {
          tile[l] = _mm512_setzero_si512();
          continue;
        }
        const float* row = src + (c + l) * ld + 2 * p0;
        const __m512i lo = bf16_in_lanes(_mm512_maskz_loadu_epi32(k_lo, row));
        const __m512i hi = bf16_in_lanes(_mm512_maskz_loadu_epi32(k_hi, row + 16));
        tile[l] = _mm512_permutex2var_epi16(lo, pick, hi);  // pair words p0 .. p0 + 15
      }
      transpose_16x16(tile);
      for (int64_t e = 0; e < std::min<int64_t>(16, Kp - p0); ++e)
        _mm512_storeu_si512(dst + (p0 + e) * dst_ld + c, tile[e]);
    }
}

// C [R, cols] (cols ≤ 16·V) = alpha · A [R, K] · B [K, 16·V] + beta · C, A and B in pair words:
// A's word (r, p) at a[r·a_row + p·a_pair], B's row p (16·V words) at b + p·b_ld. The R × V
// accumulators stay in registers over all Kp pairs; each pair broadcasts one A word per row and
// multiplies it into both B vectors (VDPBF16PS: 16 lanes × 2 multiply-adds). Masked loads and
// stores of C cover a last block narrower than 16·V; B's padding columns are zero.
template <int R, int V>
DG_BF16_TARGET void microkernel(int64_t Kp, const uint32_t* a, int64_t a_row, int64_t a_pair,
                                const uint32_t* b, int64_t b_ld, int64_t cols, float alpha,
                                float beta, float* C, int64_t ldc) {
  // The loops over r and v are unrolled (their counts are constants), so acc lives in registers.
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < Kp; ++p) {
    __m512i bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_si512(b + p * b_ld + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_set1_epi32(int(a[r * a_row + p * a_pair]));
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)av, (__m512bh)bv[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 last = first_lanes(cols - 16 * (V - 1));  // lanes of the last vector in C
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* c = C + r * ldc + 16 * v;
      const __mmask16 m = v + 1 < V ? __mmask16(0xffff) : last;
      __m512 x = _mm512_mul_ps(acc[r][v], va);
      if (beta != 0.0f) x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), vb, x);
      _mm512_mask_storeu_ps(c, m, x);
    }
}

using Microkernel = void (*)(int64_t, const uint32_t*, int64_t, int64_t, const uint32_t*, int64_t,
                             int64_t, float, float, float*, int64_t);
template <int V, int... R>
Microkernel pick_rows(int rows, std::integer_sequence<int, R...>) {
  constexpr Microkernel table[] = {microkernel<R + 1, V>...};
  return table[rows - 1];
}
Microkernel pick_microkernel(int rows, int vectors) {
  return vectors == 1 ? pick_rows<1>(rows, std::make_integer_sequence<int, rows_per_block(1)>())
                      : pick_rows<2>(rows, std::make_integer_sequence<int, rows_per_block(2)>());
}

// Per-thread buffers, grown as needed and kept: A's and B's pair words.
struct PackedOperands {
  std::vector<uint32_t> a, b;
};

void gemm_bf16_small_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                            const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                            float* C, int64_t ldc) {
  thread_local PackedOperands x;
  const int64_t Kp = (K + 1) / 2, Np = (N + 15) / 16 * 16;
  if (int64_t(x.a.size()) < M * Kp) x.a.resize(size_t(M * Kp));
  if (int64_t(x.b.size()) < Kp * Np) x.b.resize(size_t(Kp * Np));
  // op(A) [M, K]: stored [K, M] it packs as [Kp, M] (row r's pairs M words apart); stored [M, K]
  // each row rounds in place as [M, Kp] (a row's pairs adjacent). Either way no transposing.
  int64_t a_row = 1, a_pair = M;
  if (ta) {
    pack_pairs_from_rows(A, lda, K, M, x.a.data(), M);
  } else {
    a_row = Kp, a_pair = 1;
    for (int64_t i = 0; i < M; ++i) {
      x.a[size_t(i * Kp + Kp - 1)] = 0;  // an odd K's missing high half
      to_bf16(A + i * lda, K, reinterpret_cast<uint16_t*>(x.a.data() + i * Kp));
    }
  }
  // op(B) [K, N] → [Kp, Np] pair words, Np = N rounded up to 16 with zero columns.
  if (tb)
    pack_pairs_from_columns(B, ldb, K, N, x.b.data(), Np);
  else
    pack_pairs_from_rows(B, ldb, K, N, x.b.data(), Np);
  for (int64_t j = 0; j < N; j += kColumns) {
    const int64_t cols = std::min<int64_t>(kColumns, N - j);
    const int vectors = cols > 16 ? 2 : 1, block = rows_per_block(vectors);
    for (int64_t i = 0; i < M; i += block) {
      const int rows = int(std::min<int64_t>(block, M - i));
      pick_microkernel(rows, vectors)(Kp, x.a.data() + i * a_row, a_row, a_pair, x.b.data() + j, Np,
                                      cols, alpha, beta, C + i * ldc + j, ldc);
    }
  }
}
}  // namespace
#endif

void gemm_bf16_small(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc) {
  static const bool available = gemm_bf16_small_available();
  if (!available)
    throw std::runtime_error(
        "gemm_bf16_small: this CPU lacks AVX512_BF16 (gemm_bf16_small_available() is false)");
  if (M <= 0 || N <= 0) return;
#if defined(__x86_64__)
  if (K == 0) {  // nothing to multiply: C = beta · C, and beta = 0 writes zeros unread
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  gemm_bf16_small_avx512(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

}  // namespace dg
