// The fused linear head + cross-entropy kernels (see kernels_lm_head.h): the chunked forward
// beside its backward, then the plain references over the full logits.
#include "tensor/kernels_lm_head.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/fast_math.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/kernels_matmul.h"

namespace dg {

int64_t lm_head_chunk(int64_t N, int64_t V) {
  const int64_t chunk = std::max<int64_t>(kLmHeadScratch / std::max<int64_t>(N, 1) / 16 * 16, 16);
  return std::min(chunk, std::max<int64_t>(V, 1));
}

// x [N, D], W [V, D] -> per chunk of columns [c0, c0 + w): logits [N, w] = x · W[c0 : c0 + w]ᵀ
// into scratch, then per row (one owner thread) the chunk's max m_c and Σ exp(logit − m_c) are
// folded into the row's running max M (kept in lse) and sum S (double): S·e^(M − M') + s·e^(m_c
// − M'). The target's logit is picked up by the chunk that holds it (kept in losses).
template <class T>
void lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const int32_t* targets,
                        int64_t N, int64_t D, int64_t V, int32_t ignore_index, int64_t chunk,
                        T* scratch) {
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
      const int32_t t = targets[n];
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

// Per chunk of columns: logits [N, w] recomputed into scratch, turned in place into
// G = scale·(exp(logit − lse) − onehot) (rows with an ignored target zeroed), then
// dW[c0 : c0 + w] [w, D] += Gᵀ [w, N] · x [N, D] (every row at once: each dW element is written
// by one GEMM) and dx [N, D] += G [N, w] · W[c0 : c0 + w] [w, D] (summed over chunks in order).
template <class T>
void lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse, const int32_t* targets,
                         T scale, int64_t N, int64_t D, int64_t V, int32_t ignore_index,
                         int64_t chunk, T* scratch, bool scratch_has_logits) {
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    const int64_t w = std::min(chunk, V - c0);
    if (!(scratch_has_logits && w == V))  // else: the forward's logits [N, V], still in scratch
      gemm(false, true, N, w, D, T(1), x, D, W + c0 * D, D, T(0), scratch, w);  // [N, w]
#pragma omp parallel for if (N * w > kParallelGrain) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      T* row = scratch + n * w;
      const int32_t t = targets[n];
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

// ---- references: the full logits [N, V] in double ------------------------------------------

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

template <class T>
void ref_lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const int32_t* targets,
                            int64_t N, int64_t D, int64_t V, int32_t ignore_index) {
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

template <class T>
void ref_lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse,
                             const int32_t* targets, T scale, int64_t N, int64_t D, int64_t V,
                             int32_t ignore_index) {
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

#define DG_INSTANTIATE_LM_HEAD(T)                                                                \
  template void lm_head_ce_forward<T>(T*, T*, const T*, const T*, const int32_t*, int64_t,       \
                                      int64_t, int64_t, int32_t, int64_t, T*);                   \
  template void lm_head_ce_backward<T>(T*, T*, const T*, const T*, const T*, const int32_t*, T,  \
                                       int64_t, int64_t, int64_t, int32_t, int64_t, T*, bool);   \
  template void ref_lm_head_ce_forward<T>(T*, T*, const T*, const T*, const int32_t*, int64_t,   \
                                          int64_t, int64_t, int32_t);                            \
  template void ref_lm_head_ce_backward<T>(T*, T*, const T*, const T*, const T*, const int32_t*, \
                                           T, int64_t, int64_t, int64_t, int32_t);
DG_INSTANTIATE_LM_HEAD(float)
DG_INSTANTIATE_LM_HEAD(double)
#undef DG_INSTANTIATE_LM_HEAD

}  // namespace dg
