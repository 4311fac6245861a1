// Norm kernels (see kernels_norm.h): for RMSNorm, then LayerNorm, the fast forward, its plain
// reference, the fast backward and its reference. Row statistics are accumulated in double;
// outputs and saved statistics are stored in T.
// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)
#include "tensor/kernels_norm.h"

#include <algorithm>
#include <cmath>
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

}  // namespace dg
