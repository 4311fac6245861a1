// Convolution and pooling kernels (see kernels_conv.h): im2col and col2im, the conv2d forward,
// input gradient and weight gradient (GEMMs by gemm_one_thread, one image per loop iteration),
// their direct-loop references, then max and average pooling with their references.
// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)
// Column buffers are per thread (thread_local, grown to the largest conv seen and kept).
#include "tensor/kernels_conv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/cpu_features.h"
#include "tensor/kernels_conv_onednn.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"  // parallel_for

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DG_CONV_X86 1
#endif

namespace dg {

namespace {
// This thread's column buffer of at least n elements.
template <class T>
T* column_buffer(int64_t n) {
  thread_local std::vector<T> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}
// A 1×1 kernel with stride 1 and no padding reads x itself as its column matrix [Cg, H·W].
bool columns_are_input(const ConvGeom& g) {
  return g.kH == 1 && g.kW == 1 && g.sH == 1 && g.sW == 1 && g.pH == 0 && g.pW == 0;
}
}  // namespace

bool conv_runs_parallel(const ConvGeom& g) {
  return g.N * g.O * g.Ho * g.Wo * g.K() > kParallelGrain;
}

// col [Cg·kH·kW, Ho·Wo] from x [Cg, H, W]
template <class T>
void im2col(T* col, const T* x, const ConvGeom& g, int64_t ld) {
  const int64_t HoWo = g.Ho * g.Wo, stride = ld > 0 ? ld : HoWo;
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t ki = 0; ki < g.kH; ++ki)
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        T* row = col + ((c * g.kH + ki) * g.kW + kj) * stride;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * g.sH - g.pH + ki * g.dH;
          T* out = row + oh * g.Wo;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + g.Wo, T(0));
            continue;
          }
          const T* xr = x + (c * g.H + ih) * g.W;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * g.sW - g.pW + kj * g.dW;
            out[ow] = iw >= 0 && iw < g.W ? xr[iw] : T(0);
          }
        }
      }
}
template decltype(im2col<float>) im2col<float>;
template decltype(im2col<double>) im2col<double>;

// dx [Cg, H, W] += col [Cg·kH·kW, Ho·Wo] (each element's terms added in (ki, kj, oh, ow) order)
template <class T>
void col2im(T* dx, const T* col, const ConvGeom& g) {
  const int64_t HoWo = g.Ho * g.Wo;
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t ki = 0; ki < g.kH; ++ki)
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const T* row = col + ((c * g.kH + ki) * g.kW + kj) * HoWo;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * g.sH - g.pH + ki * g.dH;
          if (ih < 0 || ih >= g.H) continue;
          T* xr = dx + (c * g.H + ih) * g.W;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * g.sW - g.pW + kj * g.dW;
            if (iw >= 0 && iw < g.W) xr[iw] += row[oh * g.Wo + ow];
          }
        }
      }
}
template decltype(col2im<float>) col2im<float>;
template decltype(col2im<double>) col2im<double>;

// y [N, O, Ho, Wo]; x [N, C, H, W]; w [O, Cg, kH, kW]; bias [O] or null
template <class T>
void conv2d_forward(T* y, const T* x, const T* w, const T* bias, const ConvGeom& g) {
  if constexpr (std::is_same_v<T, float>)
    if (conv_onednn_runs(g, ConvPass::forward)) return onednn_conv2d_forward(y, x, w, bias, g);
  const int64_t HoWo = g.Ho * g.Wo, K = g.K(), Og = g.Og(), HW = g.H * g.W;
  parallel_for(g.N, conv_runs_parallel(g), [&](int64_t n) {
    OneOmpThread one;  // BLAS on this thread (a serial loop may run inside another region)
    T* col = columns_are_input(g) ? nullptr : column_buffer<T>(K * HoWo);
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      const T* xg = x + (n * g.C + gr * g.Cg()) * HW;
      T* yg = y + (n * g.O + gr * Og) * HoWo;
      if (bias)
        for (int64_t o = 0; o < Og; ++o)
          std::fill(yg + o * HoWo, yg + (o + 1) * HoWo, bias[gr * Og + o]);
      const T* cols = xg;
      if (col) {
        im2col(col, xg, g);
        cols = col;
      }
      if (HoWo > 0 && Og > 0)  // y_g [Og, HoWo] (+)= w_g [Og, K] · col [K, HoWo]
        gemm_one_thread(false, false, Og, HoWo, K, T(1), w + gr * Og * K, K, cols, HoWo,
                        bias ? T(1) : T(0), yg, HoWo);
    }
  });
}
template decltype(conv2d_forward<float>) conv2d_forward<float>;
template decltype(conv2d_forward<double>) conv2d_forward<double>;

// dx [N, C, H, W] (+=); dy [N, O, Ho, Wo]; w [O, Cg, kH, kW]
template <class T>
void conv2d_backward_input(T* dx, const T* dy, const T* w, const ConvGeom& g) {
  const int64_t HoWo = g.Ho * g.Wo, K = g.K(), Og = g.Og(), HW = g.H * g.W;
  if (HoWo == 0 || Og == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (conv_onednn_runs(g, ConvPass::backward_input))
      return onednn_conv2d_backward_input(dx, dy, w, g);
  parallel_for(g.N, conv_runs_parallel(g), [&](int64_t n) {
    OneOmpThread one;
    const bool direct = columns_are_input(g);
    T* col = direct ? nullptr : column_buffer<T>(K * HoWo);
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      T* dxg = dx + (n * g.C + gr * g.Cg()) * HW;
      const T* dyg = dy + (n * g.O + gr * Og) * HoWo;
      // col [K, HoWo] = w_gᵀ [K, Og] · dy_g [Og, HoWo]; a 1×1 conv adds it into dx directly
      gemm_one_thread(true, false, K, HoWo, Og, T(1), w + gr * Og * K, K, dyg, HoWo,
                      direct ? T(1) : T(0), direct ? dxg : col, HoWo);
      if (!direct) col2im(dxg, col, g);
    }
  });
}
template decltype(conv2d_backward_input<float>) conv2d_backward_input<float>;
template decltype(conv2d_backward_input<double>) conv2d_backward_input<double>;

template <class T>
T* weight_grad_partials(int64_t n) {
  thread_local std::vector<T> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}
template float* weight_grad_partials<float>(int64_t);
template double* weight_grad_partials<double>(int64_t);

template <class T>
void add_weight_grad_partials(T* dw, const T* partial, int64_t chunks, int64_t size) {
  // blocks of dw over the threads, each element's chunks added in chunk order (so the same bits):
  // a 32->64 3x3 layer's 64 chunks of 18k weights were 1.2M serial adds in the CNN step
  constexpr int64_t kBlock = 2048;
  parallel_for((size + kBlock - 1) / kBlock, chunks * size > kParallelGrain, [&](int64_t b) {
    const int64_t lo = b * kBlock, hi = std::min(size, lo + kBlock);
    for (int64_t c = 0; c < chunks; ++c) {
      const T* part = partial + c * size;
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dw[i] += part[i];
    }
  });
}
template decltype(add_weight_grad_partials<float>) add_weight_grad_partials<float>;
template decltype(add_weight_grad_partials<double>) add_weight_grad_partials<double>;

bool conv_weight_grad_batched(const ConvGeom& g) {
  return conv_kernel() == ConvKernel::automatic && g.groups == 1 &&
         g.Ho * g.Wo <= kConvBatchedMaxPixels && g.N > 1;
}

namespace {
// dw [O, K] += dy_all [O, N·HoWo] · col_allᵀ [N·HoWo, K]: the columns of every image side by side
// (image n at column n·HoWo), dy's images gathered per channel, one dg::gemm.
void batched_weight_grad(float* dw, const float* x, const float* dy, const ConvGeom& g) {
  const int64_t HoWo = g.Ho * g.Wo, K = g.K(), cols = g.N * HoWo, CHW = g.C * g.H * g.W;
  thread_local std::vector<float> col_buf, dy_buf;  // kept: a step asks for the same sizes
  if (static_cast<int64_t>(col_buf.size()) < K * cols) col_buf.resize(K * cols);
  if (static_cast<int64_t>(dy_buf.size()) < g.O * cols) dy_buf.resize(g.O * cols);
  float* col = col_buf.data();
  float* dyo = dy_buf.data();
  parallel_for(g.N, conv_runs_parallel(g), [&](int64_t n) {
    im2col(col + n * HoWo, x + n * CHW, g, cols);
    for (int64_t o = 0; o < g.O; ++o)
      std::copy_n(dy + (n * g.O + o) * HoWo, HoWo, dyo + o * cols + n * HoWo);
  });
  gemm(false, true, g.O, K, cols, 1.0f, dyo, cols, col, cols, 1.0f, dw, K);
}
}  // namespace

// dw [O, Cg, kH, kW] (+=), db [O] (+=) or null; x [N, C, H, W]; dy [N, O, Ho, Wo].
// partial [chunks, O·K]: chunk c sums images [c·chunk, ..) in order; then chunks in
// order into dw. db: each o sums its images and positions in order, in double.
template <class T>
void conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const ConvGeom& g) {
  const int64_t HoWo = g.Ho * g.Wo, K = g.K(), Og = g.Og(), HW = g.H * g.W;
  if (db)  // each o one owner; its rows summed in order, each row's in simd lanes (fixed order)
    parallel_for(g.O, g.N * g.O * HoWo > kParallelGrain, [&](int64_t o) {
      double acc = 0.0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* r = dy + (n * g.O + o) * HoWo;
        double row = 0.0;
#pragma omp simd reduction(+ : row)
        for (int64_t i = 0; i < HoWo; ++i) row += r[i];
        acc += row;
      }
      db[o] += static_cast<T>(acc);
    });
  if (!dw || g.N == 0 || HoWo == 0 || K == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (conv_onednn_weight_grad_whole_batch(g))
      return onednn_conv2d_backward_weight_whole_batch(dw, x, dy, g);
    if (conv_weight_grad_batched(g)) return batched_weight_grad(dw, x, dy, g);
    if (conv_onednn_runs(g, ConvPass::backward_weight))
      return onednn_conv2d_backward_weight(dw, x, dy, g);
  }
  const int64_t chunk = conv_weight_grad_chunk(g.Ho, g.Wo);
  const int64_t chunks = (g.N + chunk - 1) / chunk, WK = g.O * K;
  T* partial = weight_grad_partials<T>(chunks * WK);
  parallel_for(chunks, conv_runs_parallel(g), [&](int64_t c) {
    OneOmpThread one;
    const bool direct = columns_are_input(g);
    T* col = direct ? nullptr : column_buffer<T>(K * HoWo);
    T* part = partial + c * WK;
    const int64_t n0 = c * chunk, n1 = std::min(g.N, n0 + chunk);
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const T* xg = x + (n * g.C + gr * g.Cg()) * HW;
        if (!direct) im2col(col, xg, g);
        // part_g [Og, K] (+)= dy_g [Og, HoWo] · colᵀ [HoWo, K]
        gemm_one_thread(false, true, Og, K, HoWo, T(1), dy + (n * g.O + gr * Og) * HoWo, HoWo,
                        direct ? xg : col, HoWo, n == n0 ? T(0) : T(1), part + gr * Og * K, K);
      }
  });
  add_weight_grad_partials(dw, partial, chunks, WK);
}
template decltype(conv2d_backward_weight<float>) conv2d_backward_weight<float>;
template decltype(conv2d_backward_weight<double>) conv2d_backward_weight<double>;

template <class T>
void conv2d_backward(T* dx, T* dw, T* db, const T* x, const T* dy, const T* w, const ConvGeom& g) {
  if constexpr (std::is_same_v<T, float>)
    if (dx && dw && g.N > 0 && g.Ho * g.Wo > 0 && !conv_weight_grad_batched(g) &&
        conv_onednn_runs(g, ConvPass::backward_input) &&
        conv_onednn_runs(g, ConvPass::backward_weight)) {
      if (db) conv2d_backward_weight<T>(nullptr, db, x, dy, g);  // the bias's sums alone
      return onednn_conv2d_backward(dx, dw, x, dy, w, g);
    }
  if (dx) conv2d_backward_input<T>(dx, dy, w, g);
  if (dw || db) conv2d_backward_weight<T>(dw, db, x, dy, g);
}
template decltype(conv2d_backward<float>) conv2d_backward<float>;
template decltype(conv2d_backward<double>) conv2d_backward<double>;

// ---- direct-loop references -----------------------------------------------------------------
namespace {
// Calls f(n, o, oh, ow, c, ih, iw, w_index) for every in-range tap of the convolution (c the
// input channel, w_index the weight element), in a fixed nested order.
template <class F>
void for_each_tap(const ConvGeom& g, F&& f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o) {
      const int64_t gr = o / g.Og();
      for (int64_t oh = 0; oh < g.Ho; ++oh)
        for (int64_t ow = 0; ow < g.Wo; ++ow)
          for (int64_t cg = 0; cg < g.Cg(); ++cg)
            for (int64_t ki = 0; ki < g.kH; ++ki)
              for (int64_t kj = 0; kj < g.kW; ++kj) {
                const int64_t ih = oh * g.sH - g.pH + ki * g.dH, iw = ow * g.sW - g.pW + kj * g.dW;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                f(n, o, oh, ow, gr * g.Cg() + cg, ih, iw,
                  ((o * g.Cg() + cg) * g.kH + ki) * g.kW + kj);
              }
    }
}
}  // namespace

template <class T>
void ref_conv2d_forward(T* y, const T* x, const T* w, const T* bias, const ConvGeom& g) {
  std::vector<double> acc(g.N * g.O * g.Ho * g.Wo, 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t ih,
                      int64_t iw, int64_t wi) {
    acc[((n * g.O + o) * g.Ho + oh) * g.Wo + ow] +=
        static_cast<double>(x[((n * g.C + c) * g.H + ih) * g.W + iw]) * w[wi];
  });
  for (size_t i = 0; i < acc.size(); ++i)
    y[i] = static_cast<T>(acc[i] + (bias ? bias[(i / (g.Ho * g.Wo)) % g.O] : 0.0));
}
template decltype(ref_conv2d_forward<float>) ref_conv2d_forward<float>;
template decltype(ref_conv2d_forward<double>) ref_conv2d_forward<double>;

template <class T>
void ref_conv2d_backward_input(T* dx, const T* dy, const T* w, const ConvGeom& g) {
  std::vector<double> acc(g.N * g.C * g.H * g.W, 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t ih,
                      int64_t iw, int64_t wi) {
    acc[((n * g.C + c) * g.H + ih) * g.W + iw] +=
        static_cast<double>(dy[((n * g.O + o) * g.Ho + oh) * g.Wo + ow]) * w[wi];
  });
  for (size_t i = 0; i < acc.size(); ++i) dx[i] += static_cast<T>(acc[i]);
}
template decltype(ref_conv2d_backward_input<float>) ref_conv2d_backward_input<float>;
template decltype(ref_conv2d_backward_input<double>) ref_conv2d_backward_input<double>;

template <class T>
void ref_conv2d_backward_weight(T* dw, T* db, const T* x, const T* dy, const ConvGeom& g) {
  std::vector<double> acc(g.O * g.K(), 0.0), bacc(g.O, 0.0);
  for_each_tap(g, [&](int64_t n, int64_t o, int64_t oh, int64_t ow, int64_t c, int64_t ih,
                      int64_t iw, int64_t wi) {
    acc[wi] += static_cast<double>(dy[((n * g.O + o) * g.Ho + oh) * g.Wo + ow]) *
               x[((n * g.C + c) * g.H + ih) * g.W + iw];
  });
  for (int64_t i = 0; i < g.N * g.O * g.Ho * g.Wo; ++i) bacc[(i / (g.Ho * g.Wo)) % g.O] += dy[i];
  if (dw)
    for (size_t i = 0; i < acc.size(); ++i) dw[i] += static_cast<T>(acc[i]);
  if (db)
    for (int64_t o = 0; o < g.O; ++o) db[o] += static_cast<T>(bacc[o]);
}
template decltype(ref_conv2d_backward_weight<float>) ref_conv2d_backward_weight<float>;
template decltype(ref_conv2d_backward_weight<double>) ref_conv2d_backward_weight<double>;

// ---- max pooling ----------------------------------------------------------------------------
namespace {
// True when every window lies inside the plane with adjacent taps (no padding, dilation 1, and
// ceil_mode's last window not past the edge): max_pool_plane's fast path needs no bounds checks.
bool windows_inside(const PoolGeom& g) {
  return g.pH == 0 && g.pW == 0 && g.dH == 1 && g.dW == 1 && (g.Ho - 1) * g.sH + g.kH <= g.H &&
         (g.Wo - 1) * g.sW + g.kW <= g.W;
}

// Whether tap value v replaces the best so far: it is larger, or it is NaN and the best is not (so
// the first NaN wins, as torch's); ties keep the first. Bitwise, so it compiles to selects.
template <class T>
inline bool replaces_best(T v, T best) {
  return (v > best) | ((v != v) & (best == best));
}

// y, idx [Ho, Wo] of one plane x [H, W], by replaces_best over each window in scan order.
// One output row of the 2×2 pool with stride 2: the four taps of each window in scan order by
// replaces_best's rule, the winner's offset in its window (0, 1, W, W + 1) chosen as an integer
// of the values' width, so the loop vectorises (restrict: the rows never overlap).
template <class T, class Offset>
void max_pool_row_2x2(T* __restrict yr, Offset* __restrict off, const T* __restrict r0,
                      const T* __restrict r1, int64_t Wo, Offset W) {
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
    const bool tb = (b > a) || (b != b && a == a);
    const T m1 = tb ? b : a;
    const Offset k1 = tb ? Offset(1) : Offset(0);
    const bool tc = (c > m1) || (c != c && m1 == m1);
    const T m2 = tc ? c : m1;
    const Offset k2 = tc ? W : k1;
    const bool td = (d > m2) || (d != d && m2 == m2);
    yr[ow] = td ? d : m2;
    off[ow] = td ? W + 1 : k2;
  }
}

#if DG_CONV_X86
// replaces_best on 16 lanes: b > a (ordered), or b is NaN and a is not.
__attribute__((target("avx512f"))) inline __mmask16 replaces_best_x16(__m512 b, __m512 a) {
  return _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ) |
         (_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q));
}

// max_pool_row_2x2 for float on AVX-512, with the int64 indices: 16 windows a step (the last step
// masked), the taps split into even and odd columns by one permute per row, and replaces_best's
// rule as compares (ordered greater; unordered = NaN) and blends, in the same scan order: the same
// values and indices. A row of Wo = 14 ran about 3× faster than the compiler's loop.
__attribute__((target("avx512f"))) void max_pool_row_2x2_avx512(float* yr, int64_t* ir,
                                                                const float* r0, const float* r1,
                                                                int64_t Wo, int64_t row,
                                                                int32_t W) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t ow = 0; ow < Wo; ow += 16) {
    const int64_t n = std::min<int64_t>(16, Wo - ow);  // windows in this step
    const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xFFFFu : (1u << (2 * n)) - 1);
    const __mmask16 hi = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
    const float* p0 = r0 + 2 * ow;
    const float* p1 = r1 + 2 * ow;
    const __m512 x0 = _mm512_maskz_loadu_ps(lo, p0), x1 = _mm512_maskz_loadu_ps(hi, p0 + 16);
    const __m512 y0 = _mm512_maskz_loadu_ps(lo, p1), y1 = _mm512_maskz_loadu_ps(hi, p1 + 16);
    const __m512 a = _mm512_permutex2var_ps(x0, even, x1), b = _mm512_permutex2var_ps(x0, odd, x1);
    const __m512 c = _mm512_permutex2var_ps(y0, even, y1), d = _mm512_permutex2var_ps(y0, odd, y1);
    const __mmask16 tb = replaces_best_x16(b, a);
    const __m512 m1 = _mm512_mask_blend_ps(tb, a, b);
    const __m512i k1 = _mm512_maskz_mov_epi32(tb, _mm512_set1_epi32(1));
    const __mmask16 tc = replaces_best_x16(c, m1);
    const __m512 m2 = _mm512_mask_blend_ps(tc, m1, c);
    const __m512i k2 = _mm512_mask_blend_epi32(tc, k1, _mm512_set1_epi32(W));
    const __mmask16 td = replaces_best_x16(d, m2);
    _mm512_mask_storeu_ps(yr + ow, out, _mm512_mask_blend_ps(td, m2, d));
    const __m512i k = _mm512_mask_blend_epi32(td, k2, _mm512_set1_epi32(W + 1));
    // index = row + 2·(ow + lane) + k, widened to int64 eight lanes at a time (the maskz forms:
    // gcc 12 warns that the plain ones read an undefined register)
    const __m512i col = _mm512_add_epi32(lanes, _mm512_set1_epi32(int32_t(ow)));
    const __m512i rel = _mm512_add_epi32(_mm512_add_epi32(col, col), k);
    const __m512i base = _mm512_set1_epi64(row);
    const __m256i rel_lo = _mm512_maskz_extracti64x4_epi64(0xF, rel, 0);
    const __m256i rel_hi = _mm512_maskz_extracti64x4_epi64(0xF, rel, 1);
    _mm512_mask_storeu_epi64(ir + ow, static_cast<__mmask8>(out & 0xFF),
                             _mm512_add_epi64(base, _mm512_maskz_cvtepi32_epi64(0xFF, rel_lo)));
    if (n > 8)
      _mm512_mask_storeu_epi64(ir + ow + 8, static_cast<__mmask8>(out >> 8),
                               _mm512_add_epi64(base, _mm512_maskz_cvtepi32_epi64(0xFF, rel_hi)));
  }
}
#endif

// The 2×2 pool with stride 2 inside the plane, the commonest: a row of values and window offsets
// at a time, then the offsets widened to the int64 indices (float on AVX-512: both at once).
template <class T>
void max_pool_plane_2x2(T* y, int64_t* idx, const T* x, const PoolGeom& g) {
#if DG_CONV_X86
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = cpu_features().avx512f;
    if (avx512 && g.W < (int64_t(1) << 30) && 2 * g.Ho * g.W < (int64_t(1) << 62)) {
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const T* r0 = x + 2 * oh * g.W;
        max_pool_row_2x2_avx512(y + oh * g.Wo, idx + oh * g.Wo, r0, r0 + g.W, g.Wo, 2 * oh * g.W,
                                static_cast<int32_t>(g.W));
      }
      return;
    }
  }
#endif
  using Offset = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  thread_local std::vector<Offset> offsets;
  if (static_cast<int64_t>(offsets.size()) < g.Wo) offsets.resize(g.Wo);
  Offset* off = offsets.data();
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const T* r0 = x + 2 * oh * g.W;
    max_pool_row_2x2(y + oh * g.Wo, off, r0, r0 + g.W, g.Wo, static_cast<Offset>(g.W));
    int64_t* ir = idx + oh * g.Wo;
    const int64_t row = 2 * oh * g.W;
#pragma omp simd
    for (int64_t ow = 0; ow < g.Wo; ++ow) ir[ow] = row + 2 * ow + off[ow];
  }
}

template <class T>
void max_pool_plane(T* y, int64_t* idx, const T* x, const PoolGeom& g) {
  if (windows_inside(g) && g.kH == 2 && g.kW == 2 && g.sH == 2 && g.sW == 2)
    return max_pool_plane_2x2(y, idx, x, g);
  if (windows_inside(g)) {  // other pools inside the plane: no bounds checks
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t corner = oh * g.sH * g.W + ow * g.sW;
        T best = x[corner];
        int64_t at = corner;
        for (int64_t ki = 0; ki < g.kH; ++ki)
          for (int64_t kj = 0; kj < g.kW; ++kj) {
            const int64_t k = corner + ki * g.W + kj;
            const T v = x[k];
            // selects, not a branch: after a ReLU, which tap wins is a coin flip for a predictor
            const bool take = replaces_best(v, best);
            best = take ? v : best;
            at = take ? k : at;
          }
        y[oh * g.Wo + ow] = best;
        idx[oh * g.Wo + ow] = at;
      }
    return;
  }
  for (int64_t oh = 0; oh < g.Ho; ++oh)
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      T best = -std::numeric_limits<T>::infinity();
      int64_t at = -1;
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        const int64_t ih = oh * g.sH - g.pH + ki * g.dH;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const int64_t iw = ow * g.sW - g.pW + kj * g.dW;
          if (iw < 0 || iw >= g.W) continue;
          const T v = x[ih * g.W + iw];
          if (at < 0 || replaces_best(v, best)) {
            best = v;
            at = ih * g.W + iw;
          }
        }
      }
      y[oh * g.Wo + ow] = best;
      idx[oh * g.Wo + ow] = at;
    }
}
}  // namespace

// y, idx [P, Ho, Wo]; x [P, H, W]
template <class T>
void max_pool2d_forward(T* y, int64_t* idx, const T* x, int64_t P, const PoolGeom& g) {
  const int64_t out = g.Ho * g.Wo, in = g.H * g.W;
  parallel_for(P, P * out * g.kH * g.kW > kParallelGrain,
               [&](int64_t p) { max_pool_plane(y + p * out, idx + p * out, x + p * in, g); });
}
template decltype(max_pool2d_forward<float>) max_pool2d_forward<float>;
template decltype(max_pool2d_forward<double>) max_pool2d_forward<double>;

// Reference: every window scanned over the whole padded grid, serially.
template <class T>
void ref_max_pool2d_forward(T* y, int64_t* idx, const T* x, int64_t P, const PoolGeom& g) {
  for (int64_t p = 0; p < P; ++p)
    for (int64_t o = 0; o < g.Ho * g.Wo; ++o) {
      const int64_t oh = o / g.Wo, ow = o % g.Wo;
      double best = 0;
      int64_t at = -1;
      for (int64_t k = 0; k < g.kH * g.kW; ++k) {
        const int64_t ih = oh * g.sH - g.pH + (k / g.kW) * g.dH;
        const int64_t iw = ow * g.sW - g.pW + (k % g.kW) * g.dW;
        if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
        const double v = x[p * g.H * g.W + ih * g.W + iw];
        if (at < 0 || v > best || (v != v && best == best)) best = v, at = ih * g.W + iw;
      }
      y[p * g.Ho * g.Wo + o] = static_cast<T>(best);
      idx[p * g.Ho * g.Wo + o] = at;
    }
}
template decltype(ref_max_pool2d_forward<float>) ref_max_pool2d_forward<float>;
template decltype(ref_max_pool2d_forward<double>) ref_max_pool2d_forward<double>;

// dx [P, HW] (+=); dy, idx [P, HoWo]
template <class T>
void max_pool2d_backward(T* dx, const T* dy, const int64_t* idx, int64_t P, int64_t HW,
                         int64_t HoWo, bool dx_fresh) {
  parallel_for(P, P * HoWo > kParallelGrain, [&](int64_t p) {
    T* d = dx + p * HW;
    if (dx_fresh) std::fill(d, d + HW, T(0));
    const T* g = dy + p * HoWo;
    const int64_t* at = idx + p * HoWo;
    for (int64_t o = 0; o < HoWo; ++o) d[at[o]] += g[o];
  });
}
template decltype(max_pool2d_backward<float>) max_pool2d_backward<float>;
template decltype(max_pool2d_backward<double>) max_pool2d_backward<double>;

template <class T>
void ref_max_pool2d_backward(T* dx, const T* dy, const int64_t* idx, int64_t P, int64_t HW,
                             int64_t HoWo) {
  for (int64_t p = 0; p < P; ++p)
    for (int64_t o = 0; o < HoWo; ++o) dx[p * HW + idx[p * HoWo + o]] += dy[p * HoWo + o];
}
template decltype(ref_max_pool2d_backward<float>) ref_max_pool2d_backward<float>;
template decltype(ref_max_pool2d_backward<double>) ref_max_pool2d_backward<double>;

// ---- average pooling ------------------------------------------------------------------------
PoolWindows avg_pool_windows(const PoolGeom& g, bool count_include_pad) {
  PoolWindows w{g.H, g.W, g.Ho, g.Wo, {}, {}, {}, {}, {}, {}};
  auto axis = [&](int64_t n_out, int64_t size, int64_t k, int64_t s, int64_t p,
                  std::vector<int64_t>& st, std::vector<int64_t>& en, std::vector<int64_t>& cnt) {
    for (int64_t i = 0; i < n_out; ++i) {  // torch: the window is clipped to [−p, size + p)
      const int64_t a = i * s - p, b = std::min(a + k, size + p);
      st.push_back(std::max<int64_t>(a, 0));
      en.push_back(std::min(b, size));
      cnt.push_back(count_include_pad ? b - a : en.back() - st.back());
    }
  };
  axis(g.Ho, g.H, g.kH, g.sH, g.pH, w.hs, w.he, w.hn);
  axis(g.Wo, g.W, g.kW, g.sW, g.pW, w.ws, w.we, w.wn);
  return w;
}

PoolWindows adaptive_pool_windows(int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  PoolWindows w{H, W, Ho, Wo, {}, {}, {}, {}, {}, {}};
  auto axis = [](int64_t n_out, int64_t size, std::vector<int64_t>& st, std::vector<int64_t>& en,
                 std::vector<int64_t>& cnt) {
    for (int64_t i = 0; i < n_out; ++i) {  // floor(i·size / n_out), ceil((i + 1)·size / n_out)
      st.push_back(i * size / n_out);
      en.push_back(((i + 1) * size + n_out - 1) / n_out);
      cnt.push_back(en.back() - st.back());
    }
  };
  axis(Ho, H, w.hs, w.he, w.hn);
  axis(Wo, W, w.ws, w.we, w.wn);
  return w;
}

// y [P, Ho, Wo]; x [P, H, W]
template <class T>
void avg_pool2d_forward(T* y, const T* x, int64_t P, const PoolWindows& w) {
  parallel_for(P, P * w.H * w.W > kParallelGrain, [&](int64_t p) {
    const T* xp = x + p * w.H * w.W;
    for (int64_t i = 0; i < w.Ho; ++i)
      for (int64_t j = 0; j < w.Wo; ++j) {
        T acc = 0;
        for (int64_t h = w.hs[i]; h < w.he[i]; ++h)
          for (int64_t c = w.ws[j]; c < w.we[j]; ++c) acc += xp[h * w.W + c];
        y[(p * w.Ho + i) * w.Wo + j] = acc / static_cast<T>(w.hn[i] * w.wn[j]);
      }
  });
}
template decltype(avg_pool2d_forward<float>) avg_pool2d_forward<float>;
template decltype(avg_pool2d_forward<double>) avg_pool2d_forward<double>;

// dx [P, H, W] (+=); dy [P, Ho, Wo]
template <class T>
void avg_pool2d_backward(T* dx, const T* dy, int64_t P, const PoolWindows& w) {
  parallel_for(P, P * w.H * w.W > kParallelGrain, [&](int64_t p) {
    T* xp = dx + p * w.H * w.W;
    for (int64_t i = 0; i < w.Ho; ++i)
      for (int64_t j = 0; j < w.Wo; ++j) {
        const T v = dy[(p * w.Ho + i) * w.Wo + j] / static_cast<T>(w.hn[i] * w.wn[j]);
        for (int64_t h = w.hs[i]; h < w.he[i]; ++h)
          for (int64_t c = w.ws[j]; c < w.we[j]; ++c) xp[h * w.W + c] += v;
      }
  });
}
template decltype(avg_pool2d_backward<float>) avg_pool2d_backward<float>;
template decltype(avg_pool2d_backward<double>) avg_pool2d_backward<double>;

// References: each input element tested against every window, sums in double.
template <class T>
void ref_avg_pool2d_forward(T* y, const T* x, int64_t P, const PoolWindows& w) {
  for (int64_t p = 0; p < P; ++p)
    for (int64_t o = 0; o < w.Ho * w.Wo; ++o) {
      const int64_t i = o / w.Wo, j = o % w.Wo;
      double acc = 0;
      for (int64_t e = 0; e < w.H * w.W; ++e) {
        const int64_t h = e / w.W, c = e % w.W;
        if (h >= w.hs[i] && h < w.he[i] && c >= w.ws[j] && c < w.we[j]) acc += x[p * w.H * w.W + e];
      }
      y[p * w.Ho * w.Wo + o] = static_cast<T>(acc / static_cast<double>(w.hn[i] * w.wn[j]));
    }
}
template decltype(ref_avg_pool2d_forward<float>) ref_avg_pool2d_forward<float>;
template decltype(ref_avg_pool2d_forward<double>) ref_avg_pool2d_forward<double>;

template <class T>
void ref_avg_pool2d_backward(T* dx, const T* dy, int64_t P, const PoolWindows& w) {
  for (int64_t p = 0; p < P; ++p)
    for (int64_t e = 0; e < w.H * w.W; ++e) {
      const int64_t h = e / w.W, c = e % w.W;
      double acc = 0;
      for (int64_t o = 0; o < w.Ho * w.Wo; ++o) {
        const int64_t i = o / w.Wo, j = o % w.Wo;
        if (h >= w.hs[i] && h < w.he[i] && c >= w.ws[j] && c < w.we[j])
          acc += dy[p * w.Ho * w.Wo + o] / static_cast<double>(w.hn[i] * w.wn[j]);
      }
      dx[p * w.H * w.W + e] += static_cast<T>(acc);
    }
}
template decltype(ref_avg_pool2d_backward<float>) ref_avg_pool2d_backward<float>;
template decltype(ref_avg_pool2d_backward<double>) ref_avg_pool2d_backward<double>;

}  // namespace dg
