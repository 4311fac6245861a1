// Softmax, cross-entropy and linear + cross-entropy kernels (see kernels_loss.h): for each, the
// fast forward, its plain reference, the fast backward and its reference. Row statistics are
// accumulated in double; outputs and saved statistics are stored in T.
// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)
// and the cross-entropy ones for each with int32_t and int64_t targets (DG_LOSS_INSTANTIATE).
#include "tensor/kernels_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/fast_math.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/kernels_matmul.h"       // gemm (the head's chunks)
#include "tensor/threads.h"              // parallel_for

namespace dg {

#define DG_LOSS_INSTANTIATE(f)                              \
  template decltype(f<float, int32_t>) f<float, int32_t>;   \
  template decltype(f<float, int64_t>) f<float, int64_t>;   \
  template decltype(f<double, int32_t>) f<double, int32_t>; \
  template decltype(f<double, int64_t>) f<double, int64_t>;

// ============================================================================================
// softmax / log_softmax
// ============================================================================================

namespace {
// One row of C elements at stride `s` (1 on the fast path, where the compiler specialises it).
template <class T>
inline void softmax_row(T* o, const T* x, int64_t C, int64_t s, bool log) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; ++c) m = m < x[c * s] ? x[c * s] : m;  // std::max, vectorised
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
  if (inner == 1)
    return parallel_for(outer, par,
                        [&](int64_t r) { softmax_row(out + r * C, x + r * C, C, 1, log); });
  parallel_for(outer * inner, par, [&](int64_t r) {
    const int64_t base = (r / inner) * C * inner + r % inner;
    softmax_row(out + base, x + base, C, inner, log);
  });
}
template decltype(softmax_forward<float>) softmax_forward<float>;
template decltype(softmax_forward<double>) softmax_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
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
template decltype(ref_softmax_forward<float>) ref_softmax_forward<float>;
template decltype(ref_softmax_forward<double>) ref_softmax_forward<double>;

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
template decltype(softmax_backward<float>) softmax_backward<float>;
template decltype(softmax_backward<double>) softmax_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
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
template decltype(ref_softmax_backward<float>) ref_softmax_backward<float>;
template decltype(ref_softmax_backward<double>) ref_softmax_backward<double>;

// ============================================================================================
// cross-entropy
// ============================================================================================

// logits [N, C], targets [N] -> losses [N], lse [N]
template <class T, class I>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                           int64_t C, int64_t ignore_index) {
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * C;
    T m;
    double sum;
    max_and_sum_exp(x, C, m, sum);
    const double l = static_cast<double>(m) + std::log(sum);
    lse[n] = static_cast<T>(l);
    const int64_t t = targets[n];
    losses[n] = t == ignore_index ? T(0) : static_cast<T>(l - static_cast<double>(x[t]));
  }
}
DG_LOSS_INSTANTIATE(cross_entropy_forward)

// Reference: the formula as a plain serial loop, sums in double.
template <class T, class I>
void ref_cross_entropy_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                               int64_t C, int64_t ignore_index) {
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
DG_LOSS_INSTANTIATE(ref_cross_entropy_forward)

// dlogits, logits [N, C]; lse, targets [N]
template <class T, class I>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const I* targets, T scale,
                            int64_t N, int64_t C, int64_t ignore_index) {
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    if (t == ignore_index) continue;
    const T* x = logits + n * C;
    T* dl = dlogits + n * C;
    const T l = lse[n];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dl[c] += scale * exp_fast(x[c] - l);
    dl[t] -= scale;  // the one-hot term
  }
}
DG_LOSS_INSTANTIATE(cross_entropy_backward)

// Reference: the formula as a plain serial loop, sums in double.
template <class T, class I>
void ref_cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const I* targets,
                                T scale, int64_t N, int64_t C, int64_t ignore_index) {
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(static_cast<double>(logits[n * C + c]) - lse[n]);
      dlogits[n * C + c] += static_cast<T>(scale * (p - (c == targets[n] ? 1.0 : 0.0)));
    }
  }
}
DG_LOSS_INSTANTIATE(ref_cross_entropy_backward)

// ============================================================================================
// cross-entropy with label smoothing
// ============================================================================================

// logits [N, C], targets [N] -> losses [N], lse [N]
template <class T, class I>
void cross_entropy_smoothed_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                                    int64_t C, int64_t ignore_index, double smoothing) {
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = logits + n * C;
    T m;
    double sum, row_sum = 0.0;
    max_and_sum_exp(x, C, m, sum);
#pragma omp simd reduction(+ : row_sum)
    for (int64_t c = 0; c < C; ++c) row_sum += x[c];
    const double l = static_cast<double>(m) + std::log(sum);
    lse[n] = static_cast<T>(l);
    const int64_t t = targets[n];
    losses[n] = t == ignore_index ? T(0)
                                  : static_cast<T>(l - (1.0 - smoothing) * x[t] -
                                                   smoothing / static_cast<double>(C) * row_sum);
  }
}
DG_LOSS_INSTANTIATE(cross_entropy_smoothed_forward)

// Reference: the definition (1 − ε)·(−log p[t]) + ε·mean_c(−log p[c]), serially, in double.
template <class T, class I>
void ref_cross_entropy_smoothed_forward(T* losses, T* lse, const T* logits, const I* targets,
                                        int64_t N, int64_t C, int64_t ignore_index,
                                        double smoothing) {
  for (int64_t n = 0; n < N; ++n) {
    double m = -INFINITY, sum = 0.0, mean_nll = 0.0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(logits[n * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(logits[n * C + c] - m);
    const double l = m + std::log(sum);
    for (int64_t c = 0; c < C; ++c) mean_nll += (l - logits[n * C + c]) / static_cast<double>(C);
    lse[n] = static_cast<T>(l);
    losses[n] = targets[n] == ignore_index
                    ? T(0)
                    : static_cast<T>((1.0 - smoothing) * (l - logits[n * C + targets[n]]) +
                                     smoothing * mean_nll);
  }
}
DG_LOSS_INSTANTIATE(ref_cross_entropy_smoothed_forward)

// dlogits, logits [N, C]; lse, targets [N]
template <class T, class I>
void cross_entropy_smoothed_backward(T* dlogits, const T* logits, const T* lse, const I* targets,
                                     T scale, int64_t N, int64_t C, int64_t ignore_index,
                                     double smoothing) {
  const T uniform = static_cast<T>(smoothing / static_cast<double>(C));
  const T on_target = static_cast<T>(1.0 - smoothing);
#pragma omp parallel for if (N * C > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    if (t == ignore_index) continue;
    const T* x = logits + n * C;
    T* dl = dlogits + n * C;
    const T l = lse[n];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dl[c] += scale * (exp_fast(x[c] - l) - uniform);
    dl[t] -= scale * on_target;
  }
}
DG_LOSS_INSTANTIATE(cross_entropy_smoothed_backward)

// Reference: the formula as a plain serial loop, in double.
template <class T, class I>
void ref_cross_entropy_smoothed_backward(T* dlogits, const T* logits, const T* lse,
                                         const I* targets, T scale, int64_t N, int64_t C,
                                         int64_t ignore_index, double smoothing) {
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(static_cast<double>(logits[n * C + c]) - lse[n]);
      const double q =
          smoothing / static_cast<double>(C) + (c == targets[n] ? 1.0 - smoothing : 0.0);
      dlogits[n * C + c] += static_cast<T>(scale * (p - q));
    }
  }
}
DG_LOSS_INSTANTIATE(ref_cross_entropy_smoothed_backward)

// ============================================================================================
// linear + cross-entropy: the language-model head in column chunks
// ============================================================================================

int64_t lm_head_chunk(int64_t N, int64_t V) {
  const int64_t chunk = std::max<int64_t>(kLmHeadScratch / std::max<int64_t>(N, 1) / 16 * 16, 16);
  return std::min(chunk, std::max<int64_t>(V, 1));
}

namespace {
template <class T>
std::vector<double> ref_logits(const T* x, const T* W, int64_t N, int64_t D, int64_t V) {
  std::vector<double> logits(N * V);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V; ++v) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(x[n * D + d]) * W[v * D + d];
      logits[n * V + v] = acc;
    }
  return logits;
}
}  // namespace

// x [N, D], W [V, D] -> per chunk of columns [c0, c0 + w): logits [N, w] = x · W[c0 : c0 + w]ᵀ
// into scratch, then per row (one owner thread) the chunk's max m_c and Σ exp(logit − m_c) are
// folded into the row's running max M (kept in lse) and sum S (double): S·e^(M − M') + s·e^(m_c
// − M'). The target's logit is picked up by the chunk that holds it (kept in losses).
template <class T, class I>
void lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const I* targets, int64_t N,
                        int64_t D, int64_t V, int64_t ignore_index, int64_t chunk, T* scratch) {
  // Running sums per row, reused across calls (no allocation per training step). Reached through
  // a plain pointer: inside the parallel loop a thread_local name would mean the worker's own.
  thread_local std::vector<double> sums;
  sums.assign(N, 0.0);
  double* sum = sums.data();
  for (int64_t n = 0; n < N; ++n) {
    lse[n] = -std::numeric_limits<T>::infinity();
    losses[n] = T(0);
  }
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    const int64_t w = std::min(chunk, V - c0);
    gemm(false, true, N, w, D, T(1), x, D, W + c0 * D, D, T(0), scratch, w);  // [N, w]
#pragma omp parallel for if (N * w > kParallelGrain) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const T* row = scratch + n * w;
      T m;
      double s;
      max_and_sum_exp(row, w, m, s);
      const T M = lse[n];
      if (m > M) {
        sum[n] = sum[n] * std::exp(static_cast<double>(M) - static_cast<double>(m)) + s;
        lse[n] = m;
      } else if (m > -std::numeric_limits<T>::infinity()) {
        sum[n] += s * std::exp(static_cast<double>(m) - static_cast<double>(M));
      }
      const int64_t t = targets[n];
      if (t != ignore_index && t >= c0 && t < c0 + w) losses[n] = row[t - c0];
    }
  }
  for (int64_t n = 0; n < N; ++n) {
    const double l = static_cast<double>(lse[n]) + std::log(sum[n]);
    lse[n] = static_cast<T>(l);
    losses[n] =
        targets[n] == ignore_index ? T(0) : static_cast<T>(l - static_cast<double>(losses[n]));
  }
}
DG_LOSS_INSTANTIATE(lm_head_ce_forward)

// Reference: the full logits [N, V] in double.
template <class T, class I>
void ref_lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const I* targets, int64_t N,
                            int64_t D, int64_t V, int64_t ignore_index) {
  const std::vector<double> logits = ref_logits(x, W, N, D, V);
  for (int64_t n = 0; n < N; ++n) {
    const double* row = logits.data() + n * V;
    const double m = *std::max_element(row, row + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
    const double l = m + std::log(sum);
    lse[n] = static_cast<T>(l);
    losses[n] = targets[n] == ignore_index ? T(0) : static_cast<T>(l - row[targets[n]]);
  }
}
DG_LOSS_INSTANTIATE(ref_lm_head_ce_forward)

// Per chunk of columns: logits [N, w] recomputed into scratch, turned in place into
// G = scale·(exp(logit − lse) − onehot) (rows with an ignored target zeroed), then
// dW[c0 : c0 + w] [w, D] += Gᵀ [w, N] · x [N, D] (every row at once: each dW element is written
// by one GEMM) and dx [N, D] += G [N, w] · W[c0 : c0 + w] [w, D] (summed over chunks in order).
template <class T, class I>
void lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse, const I* targets,
                         T scale, int64_t N, int64_t D, int64_t V, int64_t ignore_index,
                         int64_t chunk, T* scratch, bool scratch_has_logits) {
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    const int64_t w = std::min(chunk, V - c0);
    if (!(scratch_has_logits && w == V))  // else: the forward's logits [N, V], still in scratch
      gemm(false, true, N, w, D, T(1), x, D, W + c0 * D, D, T(0), scratch, w);  // [N, w]
#pragma omp parallel for if (N * w > kParallelGrain) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      T* row = scratch + n * w;
      const int64_t t = targets[n];
      if (t == ignore_index) {
        std::fill(row, row + w, T(0));
        continue;
      }
      const T l = lse[n];
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) row[j] = scale * exp_fast(row[j] - l);
      if (t >= c0 && t < c0 + w) row[t - c0] -= scale;  // the one-hot term
    }
    if (dW) gemm(true, false, w, D, N, T(1), scratch, w, x, D, T(1), dW + c0 * D, D);
    if (dx) gemm(false, false, N, D, w, T(1), scratch, w, W + c0 * D, D, T(1), dx, D);
  }
}
DG_LOSS_INSTANTIATE(lm_head_ce_backward)

// Reference: the full logits [N, V] in double.
template <class T, class I>
void ref_lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse, const I* targets,
                             T scale, int64_t N, int64_t D, int64_t V, int64_t ignore_index) {
  const std::vector<double> logits = ref_logits(x, W, N, D, V);
  std::vector<double> G(N * V, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] == ignore_index) continue;
    for (int64_t v = 0; v < V; ++v)
      G[n * V + v] = static_cast<double>(scale) *
                     (std::exp(logits[n * V + v] - lse[n]) - (v == targets[n] ? 1.0 : 0.0));
  }
  if (dx)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t v = 0; v < V; ++v) acc += G[n * V + v] * W[v * D + d];
        dx[n * D + d] = static_cast<T>(dx[n * D + d] + acc);
      }
  if (dW)
    for (int64_t v = 0; v < V; ++v)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) acc += G[n * V + v] * x[n * D + d];
        dW[v * D + d] = static_cast<T>(dW[v * D + d] + acc);
      }
}
DG_LOSS_INSTANTIATE(ref_lm_head_ce_backward)

}  // namespace dg
