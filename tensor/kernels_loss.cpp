// Cross-entropy and linear + cross-entropy kernels (see kernels_loss.h): for each, the
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
#include "tensor/gemm_kernels.h"         // Bf16Rounded
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
  const Bf16Rounded x16(x, N, D, D);  // in bf16 precision x is rounded once, not per chunk
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    const int64_t w = std::min(chunk, V - c0);
    gemm(false, true, N, w, D, T(1), x, D, W + c0 * D, D, T(0), scratch, w, x16.data());  // [N, w]
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
  const Bf16Rounded x16(x, N, D, D);  // in bf16 precision x and each G are rounded once
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    const int64_t w = std::min(chunk, V - c0);
    if (!(scratch_has_logits && w == V))  // else: the forward's logits [N, V], still in scratch
      gemm(false, true, N, w, D, T(1), x, D, W + c0 * D, D, T(0), scratch, w, x16.data());
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
    const Bf16Rounded g16(scratch, dW && dx ? N : 0, w, w);  // G [N, w], read twice
    if (dW)
      gemm(true, false, w, D, N, T(1), scratch, w, x, D, T(1), dW + c0 * D, D, g16.data(),
           x16.data());
    if (dx) gemm(false, false, N, D, w, T(1), scratch, w, W + c0 * D, D, T(1), dx, D, g16.data());
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
