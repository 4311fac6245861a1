// The small bf16 GEMM on VDPBF16PS (see gemm_bf16_small.h): operands rounded and packed into K
// pairs, an 8-row × 32-column register-blocked microkernel, masked tails. The AVX-512 functions
// carry their own target attribute, so the file builds without -march flags; its reference is
// dg::ref_gemm_bf16 (tensor/gemm_kernels.cpp).
#include "tensor/gemm_bf16_small.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

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

const char* gemm_bf16_small_name() { return "avx512_bf16 dot products (8 × 32 register block)"; }

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
constexpr int kRows = 8;      // rows of C per microkernel call
constexpr int kColumns = 32;  // columns of C per microkernel call: two vectors of 16 floats

__mmask16 first_lanes(int64_t n) {  // the lowest min(max(n, 0), 16) lanes
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

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

// src [width, K] (row stride ld, k along columns) → dst [Kp, dst_ld] pair words (dst_ld a
// multiple of 16), columns from width to dst_ld zero. For a transposed B ([N, K] stored:
// attention's Kᵀ and Vᵀ). Sixteen rows at a time are rounded whole (dg::to_bf16) into block
// [16, Kp], then each pair p gathers its 16 words down the block's column into one full store:
// writing dst a word at a time, Kp rows apart, ran at a third of the speed (the rows alias in L1).
DG_BF16_TARGET void pack_pairs_from_columns(const float* src, int64_t ld, int64_t K, int64_t width,
                                            uint32_t* dst, int64_t dst_ld,
                                            std::vector<uint32_t>& block) {
  const int64_t Kp = (K + 1) / 2;
  if (int64_t(block.size()) < 16 * Kp) block.resize(size_t(16 * Kp));
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(int(Kp)));
  for (int64_t c = 0; c < dst_ld; c += 16) {
    for (int64_t l = 0; l < 16; ++l) {
      uint32_t* words = block.data() + l * Kp;
      words[Kp - 1] = 0;  // an odd K's missing high half, or a padding column's zeros
      if (c + l < width)
        to_bf16(src + (c + l) * ld, K, reinterpret_cast<uint16_t*>(words));
      else
        std::fill(words, words + Kp, 0u);
    }
    for (int64_t p = 0; p < Kp; ++p)
      _mm512_storeu_si512(
          dst + p * dst_ld + c,
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xffff, rows, block.data() + p, 4));
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
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < Kp; ++p) {
    __m512i bv[V];
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_si512(b + p * b_ld + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_set1_epi32(int(a[r * a_row + p * a_pair]));
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)av, (__m512bh)bv[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int v = 0; v < V; ++v) {
    const __mmask16 m = first_lanes(cols - 16 * v);
    for (int r = 0; r < R; ++r) {
      float* c = C + r * ldc + 16 * v;
      __m512 x = _mm512_mul_ps(acc[r][v], va);
      if (beta != 0.0f) x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), vb, x);
      _mm512_mask_storeu_ps(c, m, x);
    }
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
  const auto counts = std::make_integer_sequence<int, kRows>();
  return vectors == 1 ? pick_rows<1>(rows, counts) : pick_rows<2>(rows, counts);
}

// Per-thread buffers, grown as needed and kept: A's and B's pair words, one row of B's halves.
struct PackedOperands {
  std::vector<uint32_t> a, b, row;
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
    pack_pairs_from_columns(B, ldb, K, N, x.b.data(), Np, x.row);
  else
    pack_pairs_from_rows(B, ldb, K, N, x.b.data(), Np);
  for (int64_t j = 0; j < N; j += kColumns) {
    const int64_t cols = std::min<int64_t>(kColumns, N - j);
    for (int64_t i = 0; i < M; i += kRows) {
      const int rows = int(std::min<int64_t>(kRows, M - i));
      pick_microkernel(rows, cols > 16 ? 2 : 1)(Kp, x.a.data() + i * a_row, a_row, a_pair,
                                                x.b.data() + j, Np, cols, alpha, beta,
                                                C + i * ldc + j, ldc);
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
