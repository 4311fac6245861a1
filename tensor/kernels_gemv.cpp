// Matrix-vector product for one-token decoding (see kernels_gemv.h): the portable order, its
// AVX2 and AVX-512 twins (compiled with target attributes, chosen by what the CPU reports at run
// time, so a portable build still uses them), and the plain reference. Each fast path computes
// a block of rows at once so that every load of x serves several weight rows.
#include "tensor/kernels_gemv.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DG_GEMV_X86 1
#endif

namespace dg {

namespace {
constexpr int64_t kBlockRows = 4;  // rows of one AVX-512 block
constexpr int64_t kGemvParallelWork = int64_t(1)
                                      << 16;  // multiply-adds below which one thread runs

// ---- the portable path: gemv_portable_row (kernels_gemv.h), the order every path follows ----

#ifdef DG_GEMV_X86
// ---- AVX-512: a row's 32 lanes are two registers, lo (lanes 0-15) and hi (16-31) ----

// The tree: lo + hi is width 16; then halves of 8, 4, 2 and 1 lanes.
__attribute__((target("avx512f"))) inline float tree_avx512(__m512 lo, __m512 hi) {
  const __m512d s16 = _mm512_castps_pd(_mm512_add_ps(lo, hi));
  // (the maskz extract: GCC 12's plain one and _mm512_castps512_ps256 warn of an undefined input)
  const __m256 s8 = _mm256_add_ps(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, s16, 0)),
                                  _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xFF, s16, 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// sums [R] = W [R rows of stride ldw, cols] · x; the tail (cols mod 32) by masked FMA, which
// leaves the lanes past the end untouched.
template <int R>
__attribute__((target("avx512f"))) void avx512_rows(const float* W, int64_t ldw, int64_t cols,
                                                    const float* x, float* sums) {
  __m512 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kGemvLanes <= cols; i += kGemvLanes) {
    const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
    for (int r = 0; r < R; ++r) {
      const float* w = W + r * ldw + i;
      lo[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w), x0, lo[r]);
      hi[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + 16), x1, hi[r]);
    }
  }
  if (const int64_t rest = cols - i; rest > 0) {
    const __mmask16 m0 = rest >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rest) - 1);
    const __mmask16 m1 = rest > 16 ? __mmask16((1u << (rest - 16)) - 1) : __mmask16(0);
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, x + i), x1 = _mm512_maskz_loadu_ps(m1, x + i + 16);
    for (int r = 0; r < R; ++r) {
      const float* w = W + r * ldw + i;
      lo[r] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m0, w), x0, lo[r], m0);
      hi[r] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m1, w + 16), x1, hi[r], m1);
    }
  }
  for (int r = 0; r < R; ++r) sums[r] = tree_avx512(lo[r], hi[r]);
}

// ---- AVX2: a row's 32 lanes are four registers a[0..3] of lanes 8k .. 8k + 7 ----

// The tree: width 16 pairs a[0] with a[2] and a[1] with a[3]; width 8 adds those two.
__attribute__((target("avx2,fma"))) inline float tree_avx2(const __m256* a) {
  const __m256 s8 = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Two rows at a time (eight accumulators and four x registers fit the sixteen); the tail goes
// through memory, lane by lane, as in the portable path.
template <int R>
__attribute__((target("avx2,fma"))) void avx2_rows(const float* W, int64_t ldw, int64_t cols,
                                                   const float* x, float* sums) {
  __m256 a[R][4];
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < 4; ++k) a[r][k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + kGemvLanes <= cols; i += kGemvLanes) {
    __m256 xs[4];
    for (int k = 0; k < 4; ++k) xs[k] = _mm256_loadu_ps(x + i + 8 * k);
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 4; ++k)
        a[r][k] = _mm256_fmadd_ps(_mm256_loadu_ps(W + r * ldw + i + 8 * k), xs[k], a[r][k]);
  }
  for (int r = 0; r < R; ++r) {
    if (i < cols) {
      alignas(32) float lanes[kGemvLanes];
      for (int k = 0; k < 4; ++k) _mm256_store_ps(lanes + 8 * k, a[r][k]);
      const float* w = W + r * ldw;
      for (int64_t l = 0; i + l < cols; ++l) lanes[l] = std::fma(w[i + l], x[i + l], lanes[l]);
      for (int k = 0; k < 4; ++k) a[r][k] = _mm256_load_ps(lanes + 8 * k);
    }
    sums[r] = tree_avx2(a[r]);
  }
}
#endif

// y [count] = sums (+ y when accumulate).
template <class T>
inline void put(T* y, const T* sums, int64_t count, bool accumulate) {
  for (int64_t r = 0; r < count; ++r) y[r] = accumulate ? y[r] + sums[r] : sums[r];
}

// Each path's loop over the rows r0 .. r1 − 1 of y (+)= W · x: one call per gemv (or per
// thread), so the block kernels inline into it.
template <class T>
using RowRange = void (*)(const T* W, int64_t ldw, int64_t cols, const T* x, T* y, int64_t r0,
                          int64_t r1, bool accumulate);

template <class T>
void portable_range(const T* W, int64_t ldw, int64_t cols, const T* x, T* y, int64_t r0, int64_t r1,
                    bool accumulate) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* w = W + r * ldw;
    const T sum = gemv_portable_row([w](int64_t i) { return w[i]; }, x, cols);
    put(y + r, &sum, 1, accumulate);
  }
}

#ifdef DG_GEMV_X86
__attribute__((target("avx512f"))) void avx512_range(const float* W, int64_t ldw, int64_t cols,
                                                     const float* x, float* y, int64_t r0,
                                                     int64_t r1, bool accumulate) {
  float sums[kBlockRows];
  int64_t r = r0;
  for (; r + kBlockRows <= r1; r += kBlockRows) {
    avx512_rows<kBlockRows>(W + r * ldw, ldw, cols, x, sums);
    put(y + r, sums, kBlockRows, accumulate);
  }
  for (; r < r1; ++r) {
    avx512_rows<1>(W + r * ldw, ldw, cols, x, sums);
    put(y + r, sums, 1, accumulate);
  }
}

__attribute__((target("avx2,fma"))) void avx2_range(const float* W, int64_t ldw, int64_t cols,
                                                    const float* x, float* y, int64_t r0,
                                                    int64_t r1, bool accumulate) {
  float sums[2];
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    avx2_rows<2>(W + r * ldw, ldw, cols, x, sums);
    put(y + r, sums, 2, accumulate);
  }
  if (r < r1) {
    avx2_rows<1>(W + r * ldw, ldw, cols, x, sums);
    put(y + r, sums, 1, accumulate);
  }
}
#endif

GemvPath detect_path() {
#ifdef DG_GEMV_X86
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512f) return GemvPath::avx512;
  if (cpu.avx2 && cpu.fma) return GemvPath::avx2;
#endif
  return GemvPath::portable;
}

void check_gemv(int64_t rows, int64_t cols, int64_t ldw) {
  if (rows < 0 || cols < 0 || ldw < std::max<int64_t>(cols, 1))
    throw std::invalid_argument(
        fmt::format("gemv: rows {} and cols {} must be >= 0 and the row stride {} >= max(cols, 1)",
                    rows, cols, ldw));
}

// The driver both types share: the whole range on the calling thread when the product is small
// or one thread is set (no parallel region: even a region of one thread costs about a
// microsecond), else one contiguous range of 4-row blocks per thread. Every row is computed the
// same way in any range, so the split does not change the bits.
template <class T>
void gemv_ranges(RowRange<T> range, const T* W, int64_t rows, int64_t cols, int64_t ldw, const T* x,
                 T* y, bool accumulate) {
  check_gemv(rows, cols, ldw);
  if (rows * cols <= kGemvParallelWork || omp_get_max_threads() == 1 || omp_in_parallel())
    return range(W, ldw, cols, x, y, 0, rows, accumulate);
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = std::min(rows, blocks * t / threads * kBlockRows),
                  r1 = std::min(rows, blocks * (t + 1) / threads * kBlockRows);
    range(W, ldw, cols, x, y, r0, r1, accumulate);
  }
}
}  // namespace

GemvPath gemv_best_path() {
  static const GemvPath best = detect_path();
  return best;
}

const char* gemv_path_name(GemvPath path) {
  switch (path) {
    case GemvPath::avx512:
      return "avx512";
    case GemvPath::avx2:
      return "avx2";
    default:
      return "portable";
  }
}

void gemv(const float* W, int64_t rows, int64_t cols, int64_t ldw, const float* x, float* y,
          bool accumulate, GemvPath path) {
  const GemvPath best = gemv_best_path();
  RowRange<float> range = portable_range<float>;
#ifdef DG_GEMV_X86
  if (path == GemvPath::avx512 && best == GemvPath::avx512) range = avx512_range;
  if (path == GemvPath::avx2 && best != GemvPath::portable) range = avx2_range;
#endif
  gemv_ranges(range, W, rows, cols, ldw, x, y, accumulate);
}

void gemv(const double* W, int64_t rows, int64_t cols, int64_t ldw, const double* x, double* y,
          bool accumulate) {
  gemv_ranges<double>(portable_range<double>, W, rows, cols, ldw, x, y, accumulate);
}

template <class T>
void ref_gemv(const T* W, int64_t rows, int64_t cols, int64_t ldw, const T* x, T* y,
              bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    double dot = accumulate ? static_cast<double>(y[r]) : 0.0;
    for (int64_t i = 0; i < cols; ++i)
      dot += static_cast<double>(W[r * ldw + i]) * static_cast<double>(x[i]);
    y[r] = static_cast<T>(dot);
  }
}
template void ref_gemv<float>(const float*, int64_t, int64_t, int64_t, const float*, float*, bool);
template void ref_gemv<double>(const double*, int64_t, int64_t, int64_t, const double*, double*,
                               bool);

}  // namespace dg
