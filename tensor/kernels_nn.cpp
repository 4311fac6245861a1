// Fused nn kernels (see kernels_nn.h): each forward beside its backward, then the plain reference
// versions the tests compare against. Row statistics are accumulated in double; outputs and saved
// statistics are stored in T. Parallel loops give every output element one owner thread.
#include "tensor/kernels_nn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/tensor.h"

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
// embedding
// ============================================================================================

// W [V, D], ids [N] -> out [N, D]
template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* W, int64_t N, int64_t D) {
#pragma omp parallel for if (N * D > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(out + n * D, W + static_cast<int64_t>(ids[n]) * D, sizeof(T) * D);
}

// dout [N, D], ids [N] -> dW [V, D] +=. Tokens are bucketed by id (a stable counting sort), then
// each used vocabulary row is owned by one thread, which adds its tokens in token order.
template <class T>
void embedding_backward(T* dW, const T* dout, const int32_t* ids, int64_t N, int64_t V, int64_t D) {
  std::vector<int64_t> start(V + 1, 0), order(N);
  for (int64_t n = 0; n < N; ++n) start[ids[n] + 1]++;
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  std::vector<int64_t> used, fill(start.begin(), start.end() - 1);
  for (int64_t n = 0; n < N; ++n) order[fill[ids[n]]++] = n;
  for (int64_t v = 0; v < V; ++v)
    if (start[v + 1] > start[v]) used.push_back(v);
  const int64_t nused = static_cast<int64_t>(used.size());
#pragma omp parallel for if (N * D > kParallelGrain) schedule(dynamic, 4)
  for (int64_t u = 0; u < nused; ++u) {
    const int64_t v = used[u];
    T* row = dW + v * D;
    for (int64_t k = start[v]; k < start[v + 1]; ++k) {
      const T* g = dout + order[k] * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) row[d] += g[d];
    }
  }
}

// ============================================================================================
// softmax / log_softmax
// ============================================================================================

namespace {
// One row of C elements at stride `s` (1 on the fast path, where the compiler specialises it).
template <class T>
inline void softmax_row(T* o, const T* x, int64_t C, int64_t s, bool log) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; ++c) m = std::max(m, x[c * s]);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) {
    const T e = exp_fast(x[c * s] - m);
    o[c * s] = e;
    sum += e;
  }
  if (log) {
    const T lsum = static_cast<T>(std::log(sum));
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c * s] = (x[c * s] - m) - lsum;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c * s] *= inv;
  }
}

template <class T>
inline void softmax_backward_row(T* dx, const T* dy, const T* y, int64_t C, int64_t s, bool log) {
  double acc = 0.0;
  if (log) {
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < C; ++c) acc += dy[c * s];
    const T total = static_cast<T>(acc);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c * s] += dy[c * s] - exp_fast(y[c * s]) * total;
  } else {
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(dy[c * s]) * y[c * s];
    const T dot = static_cast<T>(acc);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c * s] += y[c * s] * (dy[c * s] - dot);
  }
}
}  // namespace

// x, out [outer, C, inner]
template <class T>
void softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log) {
  const bool par = outer * C * inner > kParallelGrain;
  if (inner == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t r = 0; r < outer; ++r) softmax_row(out + r * C, x + r * C, C, 1, log);
    return;
  }
#pragma omp parallel for if (par) schedule(static)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t base = (r / inner) * C * inner + r % inner;
    softmax_row(out + base, x + base, C, inner, log);
  }
}

// dx, dy, y [outer, C, inner]
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                      bool log) {
  const bool par = outer * C * inner > kParallelGrain;
  if (inner == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t r = 0; r < outer; ++r)
      softmax_backward_row(dx + r * C, dy + r * C, y + r * C, C, 1, log);
    return;
  }
#pragma omp parallel for if (par) schedule(static)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t base = (r / inner) * C * inner + r % inner;
    softmax_backward_row(dx + base, dy + base, y + base, C, inner, log);
  }
}

// ============================================================================================
// cross-entropy
// ============================================================================================

// logits [N, C], targets [N] -> losses [N], lse [N]
template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets, int64_t N,
                           int64_t C, int32_t ignore_index) {
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * C;
    T m;
    double sum;
    max_and_sum_exp(x, C, m, sum);
    const double l = static_cast<double>(m) + std::log(sum);
    lse[n] = static_cast<T>(l);
    const int32_t t = targets[n];
    losses[n] = t == ignore_index ? T(0) : static_cast<T>(l - static_cast<double>(x[t]));
  }
}

// dlogits, logits [N, C]; lse, targets [N]
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            T scale, int64_t N, int64_t C, int32_t ignore_index) {
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int32_t t = targets[n];
    if (t == ignore_index) continue;
    const T* x = logits + n * C;
    T* dl = dlogits + n * C;
    const T l = lse[n];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dl[c] += scale * exp_fast(x[c] - l);
    dl[t] -= scale;  // the one-hot term
  }
}

// ============================================================================================
// RMSNorm
// ============================================================================================

// x, out [rows, D]; w [D]; rstd [rows]
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t rows, int64_t D, double eps) {
#pragma omp parallel for if (rows * D > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    T* o = out + r * D;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(xr[d]) * xr[d];
    const T rs = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(D) + eps));
    rstd[r] = rs;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) o[d] = (xr[d] * rs) * w[d];
  }
}

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

// ============================================================================================
// LayerNorm
// ============================================================================================

// x, out [rows, D]; w, b [D]; mean, rstd [rows]
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t rows,
                       int64_t D, double eps) {
#pragma omp parallel for if (rows * D > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
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
  }
}

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

// ============================================================================================
// RoPE
// ============================================================================================

// cos, sin [T, hd/2]. For float every step is float32 arithmetic, as in the torch reference:
// inv_freq = 1 / base^(float(2i) / hd), angle = float(position) * inv_freq, cosf / sinf.
template <class T>
void rope_tables(T* cos, T* sin, int64_t Tn, int64_t hd, double base, int64_t offset) {
  const int64_t h = hd / 2;
  std::vector<T> inv_freq(h);
  for (int64_t i = 0; i < h; ++i)
    inv_freq[i] = T(1) / std::pow(static_cast<T>(base), static_cast<T>(2 * i) / static_cast<T>(hd));
  for (int64_t t = 0; t < Tn; ++t) {
    const T pos = static_cast<T>(offset + t);
    for (int64_t i = 0; i < h; ++i) {
      const T angle = pos * inv_freq[i];
      cos[t * h + i] = std::cos(angle);
      sin[t * h + i] = std::sin(angle);
    }
  }
}

// x, out: [B, H, T, hd] rows at the given strides; cos, sin [T, hd/2]. Forward rotation
// out[i] = x[i]cos − x[i+h]sin, out[i+h] = x[i]sin + x[i+h]cos; inverse (the transpose):
// out[i] (+)= x[i]cos + x[i+h]sin, out[i+h] (+)= −x[i]sin + x[i+h]cos.
template <class T>
void rope_rows(T* out, RowStrides os, const T* x, RowStrides xs, const T* cos, const T* sin,
               int64_t B, int64_t H, int64_t Tn, int64_t hd, bool inverse, bool overwrite) {
  const int64_t h = hd / 2, rows = B * H * Tn;
#pragma omp parallel for if (rows * hd > kParallelGrain) schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t t = row % Tn, bh = row / Tn, b = bh / H, head = bh % H;
    const T* xr = x + b * xs.b + head * xs.h + t * xs.t;
    T* o = out + b * os.b + head * os.h + t * os.t;
    const T* c = cos + t * h;
    const T* s = sin + t * h;
    if (!inverse) {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] = a * c[i] - bb * s[i];
        o[i + h] = a * s[i] + bb * c[i];
      }
    } else if (overwrite) {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] = a * c[i] + bb * s[i];
        o[i + h] = bb * c[i] - a * s[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] += a * c[i] + bb * s[i];
        o[i + h] += bb * c[i] - a * s[i];
      }
    }
  }
}

// x, out [BH, T, hd] contiguous; cos, sin [T, hd/2]
template <class T>
void rope_forward(T* out, const T* x, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                  int64_t hd) {
  const RowStrides rows{0, Tn * hd, hd};
  rope_rows(out, rows, x, rows, cos, sin, 1, BH, Tn, hd, false, true);
}

// dout, dx [BH, T, hd] contiguous; cos, sin [T, hd/2]: the transpose (= inverse) rotation, added.
template <class T>
void rope_backward(T* dx, const T* dout, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                   int64_t hd) {
  const RowStrides rows{0, Tn * hd, hd};
  rope_rows(dx, rows, dout, rows, cos, sin, 1, BH, Tn, hd, true, false);
}

// ============================================================================================
// SwiGLU
// ============================================================================================

// gate, up, out [n]
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (T(1) + exp_fast(-gate[i])) * up[i];
}

// dgate, dup, dout, gate, up [n]
template <class T>
void swiglu_backward(T* dgate, bool overwrite_gate, T* dup, bool overwrite_up, const T* dout,
                     const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], e = exp_fast(-g);
    const T s = T(1) / (T(1) + e), silu = g / (T(1) + e);
    if (dgate) {
      const T d = dout[i] * up[i] * s * (T(1) + g * (T(1) - s));
      dgate[i] = overwrite_gate ? d : dgate[i] + d;
    }
    if (dup) {
      const T d = dout[i] * silu;
      dup[i] = overwrite_up ? d : dup[i] + d;
    }
  }
}

template <class T>
void ref_swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<T>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

template <class T>
void ref_swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = 1.0 / (1.0 + std::exp(-g));
    if (dgate) dgate[i] += static_cast<T>(double(dout[i]) * up[i] * s * (1.0 + g * (1.0 - s)));
    if (dup) dup[i] += static_cast<T>(double(dout[i]) * g * s);
  }
}

// ============================================================================================
// depth mix
// ============================================================================================

// S[j], out [rows, D]; alpha [rows, J]
template <class T>
void depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                       int64_t D) {
#pragma omp parallel for if (rows * D * J > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    T* o = out + n * D;
    const T* a = alpha + n * J;
    const T* s0 = S[0] + n * D;
    const T a0 = a[0];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) o[d] = a0 * s0[d];
    for (int64_t j = 1; j < J; ++j) {
      const T* sj = S[j] + n * D;
      const T aj = a[j];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] += aj * sj[d];
    }
  }
}

// dout, S[j], dS[j] [rows, D]; alpha, dalpha [rows, J]
template <class T>
void depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S, const T* alpha,
                        int64_t rows, int64_t J, int64_t D) {
#pragma omp parallel for if (rows * D * J > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* g = dout + n * D;
    for (int64_t j = 0; j < J; ++j) {
      if (dalpha) {
        const T* sj = S[j] + n * D;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(g[d]) * sj[d];
        dalpha[n * J + j] += static_cast<T>(dot);
      }
      if (dS[j]) {
        T* dsj = dS[j] + n * D;
        const T aj = alpha[n * J + j];
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) dsj[d] += aj * g[d];
      }
    }
  }
}

// ============================================================================================
// Reference kernels: the formulas as plain serial loops, sums in double.
// ============================================================================================

template <class T>
void ref_embedding_backward(T* dW, const T* dout, const int32_t* ids, int64_t N, int64_t V,
                            int64_t D) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) dW[ids[n] * D + d] += dout[n * D + d];
}

template <class T>
void ref_softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) { return o * C * inner + c * inner + i; };
      double m = -INFINITY, sum = 0.0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x[at(c)]));
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[at(c)] - m);
      for (int64_t c = 0; c < C; ++c)
        out[at(c)] =
            static_cast<T>(log ? x[at(c)] - m - std::log(sum) : std::exp(x[at(c)] - m) / sum);
    }
}

template <class T>
void ref_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                          bool log) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) { return o * C * inner + c * inner + i; };
      double acc = 0.0;
      for (int64_t c = 0; c < C; ++c)
        acc += log ? dy[at(c)] : static_cast<double>(dy[at(c)]) * y[at(c)];
      for (int64_t c = 0; c < C; ++c) {
        const double g = dy[at(c)], yc = y[at(c)];
        dx[at(c)] += static_cast<T>(log ? g - std::exp(yc) * acc : yc * (g - acc));
      }
    }
}

template <class T>
void ref_cross_entropy_forward(T* losses, T* lse, const T* logits, const int32_t* targets,
                               int64_t N, int64_t C, int32_t ignore_index) {
  for (int64_t n = 0; n < N; ++n) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(logits[n * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(logits[n * C + c] - m);
    lse[n] = static_cast<T>(m + std::log(sum));
    losses[n] = targets[n] == ignore_index
                    ? T(0)
                    : static_cast<T>(m + std::log(sum) - logits[n * C + targets[n]]);
  }
}

template <class T>
void ref_cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                                T scale, int64_t N, int64_t C, int32_t ignore_index) {
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(static_cast<double>(logits[n * C + c]) - lse[n]);
      dlogits[n * C + c] += static_cast<T>(scale * (p - (c == targets[n] ? 1.0 : 0.0)));
    }
  }
}

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

template <class T>
void ref_rope_forward(T* out, const T* x, int64_t BH, int64_t Tn, int64_t hd, double base,
                      int64_t offset) {
  const int64_t h = hd / 2;
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t i = 0; i < h; ++i) {
        const T inv_freq =
            T(1) / std::pow(static_cast<T>(base), static_cast<T>(2 * i) / static_cast<T>(hd));
        const T angle = static_cast<T>(offset + t) * inv_freq;
        const T c = std::cos(angle), s = std::sin(angle);
        const int64_t at = (bh * Tn + t) * hd + i;
        out[at] = x[at] * c - x[at + h] * s;
        out[at + h] = x[at] * s + x[at + h] * c;
      }
}

template <class T>
void ref_depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                           int64_t D) {
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0.0;
      for (int64_t j = 0; j < J; ++j)
        acc += static_cast<double>(alpha[n * J + j]) * S[j][n * D + d];
      out[n * D + d] = static_cast<T>(acc);
    }
}

template <class T>
void ref_depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S,
                            const T* alpha, int64_t rows, int64_t J, int64_t D) {
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t j = 0; j < J; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        dot += static_cast<double>(dout[n * D + d]) * S[j][n * D + d];
        if (dS[j]) dS[j][n * D + d] += alpha[n * J + j] * dout[n * D + d];
      }
      if (dalpha) dalpha[n * J + j] += static_cast<T>(dot);
    }
}

// ---- explicit instantiations for float and double --------------------------------------------
#define DG_NN_KERNELS(T)                                                                           \
  template void embedding_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t);              \
  template void embedding_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t);    \
  template void ref_embedding_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t,          \
                                          int64_t);                                                \
  template void softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, bool);                 \
  template void softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, bool);      \
  template void ref_softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, bool);             \
  template void ref_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, bool);  \
  template void cross_entropy_forward<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t,       \
                                         int32_t);                                                 \
  template void cross_entropy_backward<T>(T*, const T*, const T*, const int32_t*, T, int64_t,      \
                                          int64_t, int32_t);                                       \
  template void ref_cross_entropy_forward<T>(T*, T*, const T*, const int32_t*, int64_t, int64_t,   \
                                             int32_t);                                             \
  template void ref_cross_entropy_backward<T>(T*, const T*, const T*, const int32_t*, T, int64_t,  \
                                              int64_t, int32_t);                                   \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);          \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t,       \
                                    int64_t);                                                      \
  template void ref_rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);      \
  template void ref_rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t,   \
                                        int64_t);                                                  \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t,   \
                                     double);                                                      \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,          \
                                      const T*, int64_t, int64_t);                                 \
  template void ref_layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t,        \
                                         int64_t, double);                                         \
  template void ref_layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,      \
                                          const T*, int64_t, int64_t);                             \
  template void rope_tables<T>(T*, T*, int64_t, int64_t, double, int64_t);                         \
  template void rope_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);      \
  template void rope_backward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t);     \
  template void rope_rows<T>(T*, RowStrides, const T*, RowStrides, const T*, const T*, int64_t,    \
                             int64_t, int64_t, int64_t, bool, bool);                               \
  template void ref_rope_forward<T>(T*, const T*, int64_t, int64_t, int64_t, double, int64_t);     \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);                                \
  template void swiglu_backward<T>(T*, bool, T*, bool, const T*, const T*, const T*, int64_t);     \
  template void ref_swiglu_forward<T>(T*, const T*, const T*, int64_t);                            \
  template void ref_swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);             \
  template void depth_mix_forward<T>(T*, const T* const*, const T*, int64_t, int64_t, int64_t);    \
  template void depth_mix_backward<T>(T* const*, T*, const T*, const T* const*, const T*, int64_t, \
                                      int64_t, int64_t);                                           \
  template void ref_depth_mix_forward<T>(T*, const T* const*, const T*, int64_t, int64_t,          \
                                         int64_t);                                                 \
  template void ref_depth_mix_backward<T>(T* const*, T*, const T*, const T* const*, const T*,      \
                                          int64_t, int64_t, int64_t);

DG_NN_KERNELS(float)
DG_NN_KERNELS(double)
#undef DG_NN_KERNELS

}  // namespace dg
