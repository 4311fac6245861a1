// Norm kernels (see kernels_norm.h): for RMSNorm, LayerNorm, BatchNorm and GroupNorm, the fast
// forward, its plain
// reference, the fast backward and its reference. Row statistics are accumulated in double;
// outputs and saved statistics are stored in T.
// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)
#include "tensor/kernels_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/tensor.h"
#include "tensor/threads.h"  // parallel_for

namespace dg {

namespace {
// A pooled scratch buffer of n elements of T (the storage cache reuses it step after step).
template <class T>
Tensor scratch(int64_t n) {
  return Tensor::empty({n}, dtype_of<T>());
}
int64_t row_chunks(int64_t rows) { return (rows + kRowChunk - 1) / kRowChunk; }

// dw[d] += Σ_chunk partial[chunk, d], chunks in increasing order: the fixed-order second stage of
// a weight-gradient reduction. partial [nchunks, D]
template <class T>
void add_chunk_sums(T* dw, const T* partial, int64_t nchunks, int64_t D) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) {
    double acc = 0.0;
    for (int64_t c = 0; c < nchunks; ++c) acc += partial[c * D + d];
    dw[d] += static_cast<T>(acc);
  }
}
}  // namespace

// ============================================================================================
// RMSNorm
// ============================================================================================

// x, out [rows, D]; w [D]; rstd [rows]
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t rows, int64_t D, double eps) {
  parallel_for(rows, rows * D > kParallelGrain, [&](int64_t r) {
    const T* xr = x + r * D;
    T* o = out + r * D;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(xr[d]) * xr[d];
    const T rs = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
    rstd[r] = rs;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) o[d] = (xr[d] * rs) * w[d];
  });
}
template decltype(rmsnorm_forward<float>) rmsnorm_forward<float>;
template decltype(rmsnorm_forward<double>) rmsnorm_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t rows, int64_t D,
                         double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x[r * D + d]) * x[r * D + d];
    const double rs = 1.0 / std::sqrt(ss / D + eps);
    rstd[r] = static_cast<T>(rs);
    for (int64_t d = 0; d < D; ++d) out[r * D + d] = static_cast<T>(x[r * D + d] * rs * w[d]);
  }
}
template decltype(ref_rmsnorm_forward<float>) ref_rmsnorm_forward<float>;
template decltype(ref_rmsnorm_forward<double>) ref_rmsnorm_forward<double>;

// dout, x, dx [rows, D]; w, dw [D]; rstd [rows]. Chunks of kRowChunk rows run in parallel; each
// writes dx for its rows and its own partial dw row, summed over chunks in order at the end.
template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                      int64_t rows, int64_t D) {
  const int64_t nchunks = row_chunks(rows);
  Tensor partial_buf = dw ? scratch<T>(nchunks * D) : Tensor();
  T* partial = dw ? partial_buf.data<T>() : nullptr;
#pragma omp parallel for if (rows * D > kParallelGrain) schedule(static)
  for (int64_t ch = 0; ch < nchunks; ++ch) {
    T* pw = partial ? partial + ch * D : nullptr;
    if (pw) std::fill(pw, pw + D, T(0));
    const int64_t end = std::min(rows, (ch + 1) * kRowChunk);
    for (int64_t r = ch * kRowChunk; r < end; ++r) {
      const T* g = dout + r * D;
      const T* xr = x + r * D;
      const T rs = rstd[r];
      if (dx) {
        double dot = 0.0;  // <g ⊙ w, x>
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(g[d] * w[d]) * xr[d];
        const T k = static_cast<T>(dot / static_cast<double>(D) * rs * rs * rs);
        T* dxr = dx + r * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) dxr[d] += rs * (g[d] * w[d]) - xr[d] * k;
      }
      if (pw) {
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) pw[d] += g[d] * (xr[d] * rs);
      }
    }
  }
  if (dw) add_chunk_sums(dw, partial, nchunks, D);
}
template decltype(rmsnorm_backward<float>) rmsnorm_backward<float>;
template decltype(rmsnorm_backward<double>) rmsnorm_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                          int64_t rows, int64_t D) {
  std::vector<double> dw_acc(D, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double rs = rstd[r];
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d)
      dot += static_cast<double>(dout[r * D + d]) * w[d] * x[r * D + d];
    for (int64_t d = 0; d < D; ++d) {
      const double g = dout[r * D + d], xv = x[r * D + d];
      if (dx) dx[r * D + d] += static_cast<T>(rs * g * w[d] - xv * rs * rs * rs * dot / D);
      dw_acc[d] += g * xv * rs;
    }
  }
  if (dw)
    for (int64_t d = 0; d < D; ++d) dw[d] += static_cast<T>(dw_acc[d]);
}
template decltype(ref_rmsnorm_backward<float>) ref_rmsnorm_backward<float>;
template decltype(ref_rmsnorm_backward<double>) ref_rmsnorm_backward<double>;

// ============================================================================================
// LayerNorm
// ============================================================================================

// x, out [rows, D]; w, b [D]; mean, rstd [rows]
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t rows,
                       int64_t D, double eps) {
  parallel_for(rows, rows * D > kParallelGrain, [&](int64_t r) {
    const T* xr = x + r * D;
    T* o = out + r * D;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < D; ++d) s += xr[d];
    const double mu = s / static_cast<double>(D);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int64_t d = 0; d < D; ++d) v += (xr[d] - mu) * (xr[d] - mu);
    const T m = static_cast<T>(mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(v / static_cast<double>(D) + eps));
    mean[r] = m;
    rstd[r] = rs;
    if (b) {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] = ((xr[d] - m) * rs) * w[d] + b[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] = ((xr[d] - m) * rs) * w[d];
    }
  });
}
template decltype(layernorm_forward<float>) layernorm_forward<float>;
template decltype(layernorm_forward<double>) layernorm_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b,
                           int64_t rows, int64_t D, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0.0, var = 0.0;
    for (int64_t d = 0; d < D; ++d) mu += x[r * D + d];
    mu /= D;
    for (int64_t d = 0; d < D; ++d) var += (x[r * D + d] - mu) * (x[r * D + d] - mu);
    const double rs = 1.0 / std::sqrt(var / D + eps);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
    for (int64_t d = 0; d < D; ++d)
      out[r * D + d] = static_cast<T>((x[r * D + d] - mu) * rs * w[d] + (b ? b[d] : 0.0));
  }
}
template decltype(ref_layernorm_forward<float>) ref_layernorm_forward<float>;
template decltype(ref_layernorm_forward<double>) ref_layernorm_forward<double>;

// dout, x, dx [rows, D]; w, dw, db [D]; mean, rstd [rows]. Same chunked scheme as RMSNorm.
template <class T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t rows, int64_t D) {
  const int64_t nchunks = row_chunks(rows);
  Tensor pw_buf = dw ? scratch<T>(nchunks * D) : Tensor();
  Tensor pb_buf = db ? scratch<T>(nchunks * D) : Tensor();
  T* partial_w = dw ? pw_buf.data<T>() : nullptr;
  T* partial_b = db ? pb_buf.data<T>() : nullptr;
#pragma omp parallel for if (rows * D > kParallelGrain) schedule(static)
  for (int64_t ch = 0; ch < nchunks; ++ch) {
    T* pw = partial_w ? partial_w + ch * D : nullptr;
    T* pb = partial_b ? partial_b + ch * D : nullptr;
    if (pw) std::fill(pw, pw + D, T(0));
    if (pb) std::fill(pb, pb + D, T(0));
    const int64_t end = std::min(rows, (ch + 1) * kRowChunk);
    for (int64_t r = ch * kRowChunk; r < end; ++r) {
      const T* g = dout + r * D;
      const T* xr = x + r * D;
      const T m = mean[r], rs = rstd[r];
      if (dx) {
        double sum_gh = 0.0, sum_ghx = 0.0;  // Σ g⊙w, Σ g⊙w⊙xhat
#pragma omp simd reduction(+ : sum_gh, sum_ghx)
        for (int64_t d = 0; d < D; ++d) {
          const T gh = g[d] * w[d];
          sum_gh += gh;
          sum_ghx += static_cast<double>(gh) * ((xr[d] - m) * rs);
        }
        const T mean_gh = static_cast<T>(sum_gh / static_cast<double>(D));
        const T mean_ghx = static_cast<T>(sum_ghx / static_cast<double>(D));
        T* dxr = dx + r * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          dxr[d] += rs * ((g[d] * w[d] - mean_gh) - ((xr[d] - m) * rs) * mean_ghx);
      }
      if (pw) {
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) pw[d] += g[d] * ((xr[d] - m) * rs);
      }
      if (pb) {
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) pb[d] += g[d];
      }
    }
  }
  if (dw) add_chunk_sums(dw, partial_w, nchunks, D);
  if (db) add_chunk_sums(db, partial_b, nchunks, D);
}
template decltype(layernorm_backward<float>) layernorm_backward<float>;
template decltype(layernorm_backward<double>) layernorm_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t rows, int64_t D) {
  std::vector<double> dw_acc(D, 0.0), db_acc(D, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double m = mean[r], rs = rstd[r];
    double sum_gh = 0.0, sum_ghx = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      const double gh = static_cast<double>(dout[r * D + d]) * w[d], xhat = (x[r * D + d] - m) * rs;
      sum_gh += gh;
      sum_ghx += gh * xhat;
      dw_acc[d] += dout[r * D + d] * xhat;
      db_acc[d] += dout[r * D + d];
    }
    if (dx)
      for (int64_t d = 0; d < D; ++d) {
        const double gh = static_cast<double>(dout[r * D + d]) * w[d],
                     xhat = (x[r * D + d] - m) * rs;
        dx[r * D + d] += static_cast<T>(rs * (gh - sum_gh / D - xhat * sum_ghx / D));
      }
  }
  for (int64_t d = 0; d < D; ++d) {
    if (dw) dw[d] += static_cast<T>(dw_acc[d]);
    if (db) db[d] += static_cast<T>(db_acc[d]);
  }
}
template decltype(ref_layernorm_backward<float>) ref_layernorm_backward<float>;
template decltype(ref_layernorm_backward<double>) ref_layernorm_backward<double>;

// ============================================================================================
// BatchNorm: per-channel statistics over x [N, C, S]
// ============================================================================================

// mean, var [C]; x [N, C, S]. One thread per channel; the N·S sums run in (n, s) order.
template <class T>
void batchnorm_stats(T* mean, T* var, const T* x, int64_t N, int64_t C, int64_t S) {
  const double M = static_cast<double>(N * S);
  parallel_for(C, N * C * S > kParallelGrain, [&](int64_t c) {
    double s = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + (n * C + c) * S;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < S; ++i) s += xr[i];
    }
    const double mu = s / M;
    double v = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + (n * C + c) * S;
#pragma omp simd reduction(+ : v)
      for (int64_t i = 0; i < S; ++i) v += (xr[i] - mu) * (xr[i] - mu);
    }
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(v / M);
  });
}
template decltype(batchnorm_stats<float>) batchnorm_stats<float>;
template decltype(batchnorm_stats<double>) batchnorm_stats<double>;

// Reference: one serial pass per statistic over x in memory order, per-channel sums in double.
template <class T>
void ref_batchnorm_stats(T* mean, T* var, const T* x, int64_t N, int64_t C, int64_t S) {
  std::vector<double> s(C, 0.0), v(C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) s[c] += x[(n * C + c) * S + i];
  for (int64_t c = 0; c < C; ++c) s[c] /= static_cast<double>(N * S);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const double d = x[(n * C + c) * S + i] - s[c];
        v[c] += d * d;
      }
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = static_cast<T>(s[c]);
    var[c] = static_cast<T>(v[c] / static_cast<double>(N * S));
  }
}
template decltype(ref_batchnorm_stats<float>) ref_batchnorm_stats<float>;
template decltype(ref_batchnorm_stats<double>) ref_batchnorm_stats<double>;

namespace {
// Channel c's affine map of batch norm, in T: out = (x − m)·scale + shift. batchnorm_apply and the
// fused ReLU's backward both evaluate it through normalized(), so the mask the backward
// recomputes is the forward's, bit for bit.
template <class T>
struct ChannelAffine {
  T m, scale, shift;
  ChannelAffine(int64_t c, const T* mean, const T* rstd, const T* w, const T* b)
      : m(mean[c]), scale(rstd[c] * (w ? w[c] : T(1))), shift(b ? b[c] : T(0)) {}
  T normalized(T x) const { return (x - m) * scale + shift; }
};
// relu's rule, as the relu kernel writes it (NaN stays: x < 0 is false)
template <class T>
inline T relu_of(T v) {
  return v < T(0) ? T(0) : v;
}
}  // namespace

// out, x [N, C, S]; mean, rstd, w, b [C]. One thread per (n, c) row.
template <class T>
void batchnorm_apply(T* out, const T* x, const T* mean, const T* rstd, const T* w, const T* b,
                     int64_t N, int64_t C, int64_t S, bool relu) {
  parallel_for(N * C, N * C * S > kParallelGrain, [&](int64_t row) {
    const ChannelAffine<T> f(row % C, mean, rstd, w, b);
    const T* xr = x + row * S;
    T* o = out + row * S;
    if (relu) {
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) o[i] = relu_of(f.normalized(xr[i]));
    } else {
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) o[i] = f.normalized(xr[i]);
    }
  });
}
template decltype(batchnorm_apply<float>) batchnorm_apply<float>;
template decltype(batchnorm_apply<double>) batchnorm_apply<double>;

template <class T>
void ref_batchnorm_apply(T* out, const T* x, const T* mean, const T* rstd, const T* w, const T* b,
                         int64_t N, int64_t C, int64_t S, bool relu) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        const double xhat = (static_cast<double>(x[k]) - mean[c]) * rstd[c];
        const double v = xhat * (w ? w[c] : 1.0) + (b ? b[c] : 0.0);
        out[k] = static_cast<T>(relu && v < 0.0 ? 0.0 : v);
      }
}
template decltype(ref_batchnorm_apply<float>) ref_batchnorm_apply<float>;
template decltype(ref_batchnorm_apply<double>) ref_batchnorm_apply<double>;

namespace {
// dout at element i, or with Relu relu's backward on the output recomputed from x by f (0 where
// it was not above 0): the forward's own expression, the same bits. The zero is made by a bit
// mask: written as a conditional, the compiler branched around g's load and did not vectorise
// the loop.
template <bool Relu, class T>
inline T relu_masked(T g, T x, const ChannelAffine<T>& f) {
  if constexpr (Relu) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const bool keep = !(f.normalized(x) <= T(0));
    return std::bit_cast<T>(std::bit_cast<Bits>(g) & (Bits(0) - Bits(keep)));
  }
  return g;
}

// Channel c's terms of dx = k·(g − mean_g − (x − m)·rs·mean_gx), in double.
struct BatchNormDxTerms {
  double m, rs, k, mean_g, mean_gx;
};

// dx rows of channel c: d = (Fresh ? 0 : d) + the terms' value, g relu-masked by f.
template <bool Relu, bool Fresh, class T>
void batchnorm_dx_channel(T* dx, const T* dout, const T* x, const ChannelAffine<T>& f,
                          const BatchNormDxTerms& t, int64_t N, int64_t C, int64_t S, int64_t c) {
  const double m = t.m, rs = t.rs, k = t.k, mean_g = t.mean_g, mean_gx = t.mean_gx;
  for (int64_t n = 0; n < N; ++n) {
    const T* g = dout + (n * C + c) * S;
    const T* xr = x + (n * C + c) * S;
    T* d = dx + (n * C + c) * S;
#pragma omp simd
    for (int64_t i = 0; i < S; ++i)
      d[i] = (Fresh ? T(0) : d[i]) + static_cast<T>(k * (relu_masked<Relu>(g[i], xr[i], f) -
                                                         mean_g - (xr[i] - m) * rs * mean_gx));
  }
}

// Channel c of batchnorm_backward: its two sums, then its dx elements.
template <bool Relu, class T>
void batchnorm_backward_channel(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                                const T* b, const T* mean, const T* rstd, int64_t N, int64_t C,
                                int64_t S, int64_t c, bool batch_stats, bool dx_fresh) {
  const double M = static_cast<double>(N * S), m = mean[c], rs = rstd[c];
  const ChannelAffine<T> f(c, mean, rstd, w, b);
  double sum_g = 0.0, sum_gx = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const T* g = dout + (n * C + c) * S;
    const T* xr = x + (n * C + c) * S;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t i = 0; i < S; ++i) {
      const T gi = relu_masked<Relu>(g[i], xr[i], f);
      sum_g += gi;
      sum_gx += gi * ((xr[i] - m) * rs);
    }
  }
  if (dw) dw[c] += static_cast<T>(sum_gx);
  if (db) db[c] += static_cast<T>(sum_g);
  if (!dx) return;
  const BatchNormDxTerms terms{m, rs, rs * (w ? static_cast<double>(w[c]) : 1.0),
                               batch_stats ? sum_g / M : 0.0, batch_stats ? sum_gx / M : 0.0};
  if (dx_fresh)
    batchnorm_dx_channel<Relu, true>(dx, dout, x, f, terms, N, C, S, c);
  else
    batchnorm_dx_channel<Relu, false>(dx, dout, x, f, terms, N, C, S, c);
}
}  // namespace

// dx, dout, x [N, C, S]; dw, db, w, b, mean, rstd [C]. One thread per channel (relu: the output's
// mask recomputed per element, see the header).
template <class T>
void batchnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C, int64_t S, bool batch_stats, bool relu,
                        const T* b, bool dx_fresh) {
  parallel_for(C, N * C * S > kParallelGrain, [&](int64_t c) {
    if (relu)
      batchnorm_backward_channel<true>(dx, dw, db, dout, x, w, b, mean, rstd, N, C, S, c,
                                       batch_stats, dx_fresh);
    else
      batchnorm_backward_channel<false>(dx, dw, db, dout, x, w, b, mean, rstd, N, C, S, c,
                                        batch_stats, dx_fresh);
  });
}
template decltype(batchnorm_backward<float>) batchnorm_backward<float>;
template decltype(batchnorm_backward<double>) batchnorm_backward<double>;

// Reference: the formula as plain serial loops in memory order, sums in double.
template <class T>
void ref_batchnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t N, int64_t C, int64_t S,
                            bool batch_stats, bool relu, const T* b) {
  std::vector<double> sum_g(C, 0.0), sum_gx(C, 0.0);
  auto xhat = [&](int64_t k, int64_t c) { return (static_cast<double>(x[k]) - mean[c]) * rstd[c]; };
  auto grad = [&](int64_t k, int64_t c) {  // relu's backward on the output, recomputed in double
    const double out = xhat(k, c) * (w ? w[c] : 1.0) + (b ? b[c] : 0.0);
    return relu && out <= 0.0 ? 0.0 : static_cast<double>(dout[k]);
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        sum_g[c] += grad(k, c);
        sum_gx[c] += grad(k, c) * xhat(k, c);
      }
  const double M = static_cast<double>(N * S);
  for (int64_t c = 0; c < C; ++c) {
    if (dw) dw[c] += static_cast<T>(sum_gx[c]);
    if (db) db[c] += static_cast<T>(sum_g[c]);
  }
  if (!dx) return;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        double inner = grad(k, c);
        if (batch_stats) inner -= sum_g[c] / M + xhat(k, c) * sum_gx[c] / M;
        dx[k] += static_cast<T>((w ? w[c] : 1.0) * rstd[c] * inner);
      }
}
template decltype(ref_batchnorm_backward<float>) ref_batchnorm_backward<float>;
template decltype(ref_batchnorm_backward<double>) ref_batchnorm_backward<double>;

// ============================================================================================
// GroupNorm: statistics per (n, group) over D = C/G·S contiguous elements
// ============================================================================================

// out, x [N, C, S]; w, b [C]; mean, rstd [N, G]. One thread per (n, g) row.
template <class T>
void groupnorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N,
                       int64_t C, int64_t S, int64_t G, double eps) {
  const int64_t Cg = C / G, D = Cg * S;
  parallel_for(N * G, N * C * S > kParallelGrain, [&](int64_t r) {
    const T* xr = x + r * D;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < D; ++d) s += xr[d];
    const double mu = s / static_cast<double>(D);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int64_t d = 0; d < D; ++d) v += (xr[d] - mu) * (xr[d] - mu);
    const T m = static_cast<T>(mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(v / static_cast<double>(D) + eps));
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t j = 0; j < Cg; ++j) {
      const int64_t c = (r % G) * Cg + j;
      const T scale = rs * (w ? w[c] : T(1)), shift = b ? b[c] : T(0);
      const T* xc = xr + j * S;
      T* o = out + r * D + j * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) o[i] = (xc[i] - m) * scale + shift;
    }
  });
}
template decltype(groupnorm_forward<float>) groupnorm_forward<float>;
template decltype(groupnorm_forward<double>) groupnorm_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_groupnorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N,
                           int64_t C, int64_t S, int64_t G, double eps) {
  const int64_t Cg = C / G, D = Cg * S;
  for (int64_t r = 0; r < N * G; ++r) {
    double s = 0.0, v = 0.0;
    for (int64_t d = 0; d < D; ++d) s += x[r * D + d];
    const double mu = s / D;
    for (int64_t d = 0; d < D; ++d) v += (x[r * D + d] - mu) * (x[r * D + d] - mu);
    const double rs = 1.0 / std::sqrt(v / D + eps);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = (r % G) * Cg + d / S;
      out[r * D + d] =
          static_cast<T>((x[r * D + d] - mu) * rs * (w ? w[c] : 1.0) + (b ? b[c] : 0.0));
    }
  }
}
template decltype(ref_groupnorm_forward<float>) ref_groupnorm_forward<float>;
template decltype(ref_groupnorm_forward<double>) ref_groupnorm_forward<double>;

// dx, dout, x [N, C, S]; dw, db, w [C]; mean, rstd [N, G]. dx: one thread per (n, g) row; dw, db:
// one thread per channel, summing over n then s.
template <class T>
void groupnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C, int64_t S, int64_t G) {
  const int64_t Cg = C / G, D = Cg * S;
  const bool parallel = N * C * S > kParallelGrain;
  if (dx)
    parallel_for(N * G, parallel, [&](int64_t r) {
      const double m = mean[r], rs = rstd[r];
      double sum_gw = 0.0, sum_gwx = 0.0;
      for (int64_t j = 0; j < Cg; ++j) {
        const double wc = w ? static_cast<double>(w[(r % G) * Cg + j]) : 1.0;
        const T* g = dout + r * D + j * S;
        const T* xc = x + r * D + j * S;
        double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t i = 0; i < S; ++i) {
          sg += g[i];
          sgx += g[i] * ((xc[i] - m) * rs);
        }
        sum_gw += wc * sg;
        sum_gwx += wc * sgx;
      }
      const double mean_gw = sum_gw / static_cast<double>(D), mean_gwx = sum_gwx / D;
      for (int64_t j = 0; j < Cg; ++j) {
        const double wc = w ? static_cast<double>(w[(r % G) * Cg + j]) : 1.0;
        const T* g = dout + r * D + j * S;
        const T* xc = x + r * D + j * S;
        T* d = dx + r * D + j * S;
#pragma omp simd
        for (int64_t i = 0; i < S; ++i)
          d[i] += static_cast<T>(rs * (wc * g[i] - mean_gw - (xc[i] - m) * rs * mean_gwx));
      }
    });
  if (dw || db)
    parallel_for(C, parallel, [&](int64_t c) {
      double sg = 0.0, sgx = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t r = n * G + c / Cg;
        const double m = mean[r], rs = rstd[r];
        const T* g = dout + (n * C + c) * S;
        const T* xc = x + (n * C + c) * S;
#pragma omp simd reduction(+ : sg, sgx)
        for (int64_t i = 0; i < S; ++i) {
          sg += g[i];
          sgx += g[i] * ((xc[i] - m) * rs);
        }
      }
      if (dw) dw[c] += static_cast<T>(sgx);
      if (db) db[c] += static_cast<T>(sg);
    });
}
template decltype(groupnorm_backward<float>) groupnorm_backward<float>;
template decltype(groupnorm_backward<double>) groupnorm_backward<double>;

// Reference: the formula as plain serial loops, sums in double.
template <class T>
void ref_groupnorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w,
                            const T* mean, const T* rstd, int64_t N, int64_t C, int64_t S,
                            int64_t G) {
  const int64_t Cg = C / G, D = Cg * S;
  std::vector<double> sg(C, 0.0), sgx(C, 0.0);
  for (int64_t r = 0; r < N * G; ++r) {
    auto channel = [&](int64_t d) { return (r % G) * Cg + d / S; };
    auto xhat = [&](int64_t d) { return (static_cast<double>(x[r * D + d]) - mean[r]) * rstd[r]; };
    double sum_gw = 0.0, sum_gwx = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      const double g = dout[r * D + d], wc = w ? w[channel(d)] : 1.0;
      sum_gw += g * wc;
      sum_gwx += g * wc * xhat(d);
      sg[channel(d)] += g;
      sgx[channel(d)] += g * xhat(d);
    }
    if (dx)
      for (int64_t d = 0; d < D; ++d) {
        const double gw = dout[r * D + d] * (w ? w[channel(d)] : 1.0);
        dx[r * D + d] += static_cast<T>(rstd[r] * (gw - sum_gw / D - xhat(d) * sum_gwx / D));
      }
  }
  for (int64_t c = 0; c < C; ++c) {
    if (dw) dw[c] += static_cast<T>(sgx[c]);
    if (db) db[c] += static_cast<T>(sg[c]);
  }
}
template decltype(ref_groupnorm_backward<float>) ref_groupnorm_backward<float>;
template decltype(ref_groupnorm_backward<double>) ref_groupnorm_backward<double>;

}  // namespace dg
