// The fast products over a quantized matrix (see quantized_matrix.h): the panel GEMMs (a few dozen
// rows of Ŵ dequantised at a time into a per-thread buffer, then one one-thread GEMM each), and
// the GEMV that reads the int8 / bf16 rows directly, with AVX-512 and AVX2 twins of its portable
// order (compiled with target attributes, chosen at run time as kernels_gemv.cpp's).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "tensor/quantized_matrix.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DG_QGEMV_X86 1
#endif

namespace dg {

namespace {
// Below this many multiply-adds a product runs on the calling thread (as gemm's bound).
bool run_serially(int64_t work) {
  return work <= kGemmParallelMinWork || omp_get_max_threads() == 1 || omp_in_parallel();
}

// A per-thread buffer of at least n elements, kept for the next call.
template <class T>
T* panel_buffer(int64_t n) {
  thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

// Ŵ[row0 .. row0 + count, col0 .. col0 + width] -> out [count, width] (a tile of a panel), by
// dequantize_rows's formula.
template <class T>
void dequantize_tile(const QuantizedMatrix& q, int64_t row0, int64_t count, int64_t col0,
                     int64_t width, T* out) {
  if (col0 == 0 && width == q.cols) return dequantize_rows<T>(q, row0, count, out);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t at = (row0 + r) * q.cols + col0;
    T* row = out + r * width;
    if (q.format == QuantFormat::bf16) {
      const uint16_t* src = q.bf16_rows() + at;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) row[j] = static_cast<T>(bf16_value(src[j]));
      continue;
    }
    const float s = q.scale_data()[row0 + r];
    const int8_t* src = q.int8_rows() + at;
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) row[j] = static_cast<T>(s * static_cast<float>(src[j]));
  }
}

// Y[:, panel p] = X · Ŵ[panel p]ᵀ (+ Y): one panel, on the calling thread.
template <class T>
void forward_panel(const T* X, int64_t M, int64_t ldx, const QuantizedMatrix& q, T* Y, int64_t ldy,
                   bool accumulate, int64_t p) {
  const int64_t K = q.cols, row0 = p * kQuantPanelRows;
  const int64_t count = std::min(kQuantPanelRows, q.rows - row0);
  T* panel = panel_buffer<T>(count * K);
  dequantize_rows<T>(q, row0, count, panel);
  gemm_one_thread(false, true, M, count, K, T(1), X, ldx, panel, K, accumulate ? T(1) : T(0),
                  Y + row0, ldy);
}

// dX tile (rows m0.., cols k0..) = Σ over Ŵ's panels in order of dY[m, panel] · Ŵ[panel, tile].
template <class T>
void backward_tile(const T* dY, int64_t lddy, const QuantizedMatrix& q, T* dX, int64_t lddx,
                   bool accumulate, int64_t m0, int64_t rows, int64_t k0, int64_t width) {
  T* panel = panel_buffer<T>(kQuantPanelRows * width);
  for (int64_t row0 = 0; row0 < q.rows; row0 += kQuantPanelRows) {
    const int64_t count = std::min(kQuantPanelRows, q.rows - row0);
    dequantize_tile<T>(q, row0, count, k0, width, panel);
    const bool add = accumulate || row0 > 0;
    gemm_one_thread(false, false, rows, width, count, T(1), dY + m0 * lddy + row0, lddy, panel,
                    width, add ? T(1) : T(0), dX + m0 * lddx + k0, lddx);
  }
}
}  // namespace

template <class T>
void quantized_matmul(const T* X, int64_t M, int64_t ldx, const QuantizedMatrix& q, T* Y,
                      int64_t ldy, bool accumulate) {
  q.check("quantized_matmul");
  const int64_t N = q.rows, K = q.cols;
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(Y + m * ldy, Y + m * ldy + N, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    if (M == 1) return quantized_gemv(q, X, Y, accumulate);
  const int64_t panels = (N + kQuantPanelRows - 1) / kQuantPanelRows;
  if (run_serially(M * N * K)) {
    for (int64_t p = 0; p < panels; ++p) forward_panel(X, M, ldx, q, Y, ldy, accumulate, p);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) forward_panel(X, M, ldx, q, Y, ldy, accumulate, p);
}

template <class T>
void quantized_matmul_backward_input(const T* dY, int64_t M, int64_t lddy, const QuantizedMatrix& q,
                                     T* dX, int64_t lddx, bool accumulate) {
  q.check("quantized_matmul_backward_input");
  const int64_t N = q.rows, K = q.cols;
  if (M == 0 || K == 0) return;
  if (N == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(dX + m * lddx, dX + m * lddx + K, T(0));
    return;
  }
  const int64_t row_tiles = (M + kQuantTileRows - 1) / kQuantTileRows;
  const int64_t col_tiles = (K + kQuantTileCols - 1) / kQuantTileCols;
  auto tile = [&](int64_t t) {
    const int64_t m0 = (t / col_tiles) * kQuantTileRows, k0 = (t % col_tiles) * kQuantTileCols;
    backward_tile(dY, lddy, q, dX, lddx, accumulate, m0, std::min(kQuantTileRows, M - m0), k0,
                  std::min(kQuantTileCols, K - k0));
  };
  if (run_serially(M * N * K)) {
    for (int64_t t = 0; t < row_tiles * col_tiles; ++t) tile(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < row_tiles * col_tiles; ++t) tile(t);
}

template void quantized_matmul<float>(const float*, int64_t, int64_t, const QuantizedMatrix&,
                                      float*, int64_t, bool);
template void quantized_matmul<double>(const double*, int64_t, int64_t, const QuantizedMatrix&,
                                       double*, int64_t, bool);
template void quantized_matmul_backward_input<float>(const float*, int64_t, int64_t,
                                                     const QuantizedMatrix&, float*, int64_t, bool);
template void quantized_matmul_backward_input<double>(const double*, int64_t, int64_t,
                                                      const QuantizedMatrix&, double*, int64_t,
                                                      bool);

// ---- the GEMV: y = Ŵ · x, reading the stored rows --------------------------------------------
namespace {
constexpr int64_t kLanes = kGemvLanes;  // 32: the order of kernels_gemv.h

// The stored weight k of a row as a float: the int8 value (× s_o comes after the sum), or the
// bf16 value exactly.
inline float stored(const int8_t* w, int64_t k) { return static_cast<float>(w[k]); }
inline float stored(const uint16_t* w, int64_t k) { return bf16_value(w[k]); }

#ifdef DG_QGEMV_X86
// 16 stored weights from w + k as floats.
// (the maskz forms: GCC 12's plain ones warn of an undefined input, as in kernels_gemv.cpp)
__attribute__((target("avx512f"))) inline __m512 load16(const int8_t* w, int64_t k) {
  const __m512i wide = _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128((const __m128i*)(w + k)));
  return _mm512_maskz_cvtepi32_ps(0xFFFF, wide);
}
__attribute__((target("avx512f"))) inline __m512 load16(const uint16_t* w, int64_t k) {
  const __m512i wide =
      _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256((const __m256i*)(w + k)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
}
__attribute__((target("avx512f"))) inline float lanes_tree_avx512(__m512 lo, __m512 hi) {
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, lo);
  _mm512_store_ps(lanes + 16, hi);
  return gemv_lane_tree(lanes);
}

// sums [R] of R rows (stride ld): lanes 0-15 in lo, 16-31 in hi; the tail from zero-padded copies
// by masked FMA, which leaves the lanes past the end untouched (as the portable path).
template <int R, class W>
__attribute__((target("avx512f"))) void avx512_rows(const W* w, int64_t ld, int64_t K,
                                                    const float* x, float* sums) {
  __m512 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
    for (int r = 0; r < R; ++r) {
      lo[r] = _mm512_fmadd_ps(load16(w + r * ld, k), x0, lo[r]);
      hi[r] = _mm512_fmadd_ps(load16(w + r * ld, k + 16), x1, hi[r]);
    }
  }
  if (const int64_t rest = K - k; rest > 0) {
    const __mmask16 m0 = rest >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rest) - 1);
    const __mmask16 m1 = rest > 16 ? __mmask16((1u << (rest - 16)) - 1) : __mmask16(0);
    alignas(64) float xs[kLanes] = {};
    std::memcpy(xs, x + k, sizeof(float) * rest);
    const __m512 x0 = _mm512_load_ps(xs), x1 = _mm512_load_ps(xs + 16);
    for (int r = 0; r < R; ++r) {
      W ws[kLanes] = {};
      std::memcpy(ws, w + r * ld + k, sizeof(W) * rest);
      lo[r] = _mm512_mask3_fmadd_ps(load16(ws, 0), x0, lo[r], m0);
      hi[r] = _mm512_mask3_fmadd_ps(load16(ws, 16), x1, hi[r], m1);
    }
  }
  for (int r = 0; r < R; ++r) sums[r] = lanes_tree_avx512(lo[r], hi[r]);
}

// 8 stored weights from w + k as floats.
__attribute__((target("avx2,fma"))) inline __m256 load8(const int8_t* w, int64_t k) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(w + k))));
}
__attribute__((target("avx2,fma"))) inline __m256 load8(const uint16_t* w, int64_t k) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(w + k)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// sums [R]: a row's 32 lanes in four registers of 8; the tail through memory, lane by lane.
template <int R, class W>
__attribute__((target("avx2,fma"))) void avx2_rows(const W* w, int64_t ld, int64_t K,
                                                   const float* x, float* sums) {
  __m256 a[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) a[r][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes)
    for (int j = 0; j < 4; ++j) {
      const __m256 xs = _mm256_loadu_ps(x + k + 8 * j);
      for (int r = 0; r < R; ++r)
        a[r][j] = _mm256_fmadd_ps(load8(w + r * ld, k + 8 * j), xs, a[r][j]);
    }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lanes[kLanes];
    for (int j = 0; j < 4; ++j) _mm256_store_ps(lanes + 8 * j, a[r][j]);
    for (int64_t l = 0; k + l < K; ++l)
      lanes[l] = std::fma(stored(w + r * ld, k + l), x[k + l], lanes[l]);
    sums[r] = gemv_lane_tree(lanes);
  }
}
#endif

// Rows r0 .. r1 − 1 of the GEMV on one path: sums, then × s_o (int8), then + y.
template <class W>
void gemv_range(const QuantizedMatrix& q, const W* rows, const float* x, float* y, bool accumulate,
                GemvPath path, int64_t r0, int64_t r1) {
  const int64_t K = q.cols;
  const float* scales = q.format == QuantFormat::int8 ? q.scale_data() : nullptr;
  constexpr int64_t kBlock = 4;
  float sums[kBlock];
  for (int64_t r = r0; r < r1; r += kBlock) {
    const int64_t count = std::min(kBlock, r1 - r);
    const W* w = rows + r * K;
#ifdef DG_QGEMV_X86
    if (path == GemvPath::avx512 && count == kBlock)
      avx512_rows<4>(w, K, K, x, sums);
    else if (path == GemvPath::avx512)
      for (int64_t i = 0; i < count; ++i) avx512_rows<1>(w + i * K, K, K, x, sums + i);
    else if (path == GemvPath::avx2)
      for (int64_t i = 0; i < count; i += 2)
        count - i >= 2 ? avx2_rows<2>(w + i * K, K, K, x, sums + i)
                       : avx2_rows<1>(w + i * K, K, K, x, sums + i);
    else
#endif
      for (int64_t i = 0; i < count; ++i) {
        const W* row = w + i * K;
        sums[i] = gemv_portable_row([row](int64_t k) { return stored(row, k); }, x, K);
      }
    for (int64_t i = 0; i < count; ++i) {
      const float v = scales ? scales[r + i] * sums[i] : sums[i];
      y[r + i] = accumulate ? y[r + i] + v : v;
    }
  }
}

GemvPath runnable(GemvPath asked) {
  const GemvPath best = gemv_best_path();
  if (asked == GemvPath::avx512) return best == GemvPath::avx512 ? asked : GemvPath::portable;
  if (asked == GemvPath::avx2) return best != GemvPath::portable ? asked : GemvPath::portable;
  return GemvPath::portable;
}
}  // namespace

void quantized_gemv(const QuantizedMatrix& q, const float* x, float* y, bool accumulate,
                    GemvPath path) {
  q.check("quantized_gemv");
  path = runnable(path);
  const int64_t N = q.rows;
  auto range = [&](int64_t r0, int64_t r1) {
    if (q.format == QuantFormat::int8)
      gemv_range(q, q.int8_rows(), x, y, accumulate, path, r0, r1);
    else
      gemv_range(q, q.bf16_rows(), x, y, accumulate, path, r0, r1);
  };
  if (N * q.cols <= (int64_t(1) << 16) || omp_get_max_threads() == 1 || omp_in_parallel())
    return range(0, N);
  const int64_t blocks = (N + 3) / 4;  // whole 4-row blocks per thread: the same bits anywhere
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    range(std::min(N, blocks * t / threads * 4), std::min(N, blocks * (t + 1) / threads * 4));
  }
}

}  // namespace dg
