// The cross-entropy losses (softmax itself is in kernels_softmax.h): cross-entropy over given
// logits, with label smoothing, and the fused language-model head (linear + cross-entropy in
// column chunks, never holding the [N, V] logits). llm.c style: each `X_forward` beside its
// `X_backward`, which ADDS into its gradient outputs (a null pointer: not needed); ref_* versions
// are plain loops the tests compare against. Every output element has one owner thread, so
// float32 results are bit-identical at any thread count. These kernels do not check shapes,
// targets or dtypes and do not record autograd (autograd/ops_loss.cpp does).
// All pointers are to contiguous row-major buffers; targets are int32_t or int64_t (I), read in
// place with the same arithmetic for either.
#pragma once
#include <cstdint>

namespace dg {

// ---- cross-entropy --------------------------------------------------------------------------
// logits [N, C], targets [N] -> losses [N] = logsumexp(logits[n]) − logits[n, t_n] (0 where
// t_n == ignore_index) and lse [N] (saved for backward). Targets must be in [0, C) or ignored.
template <class T, class I>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                           int64_t C, int64_t ignore_index);
// dlogits[n, c] += scale · (exp(logits[n, c] − lse[n]) − [c == t_n]) for rows not ignored;
// scale = dloss / (number of rows not ignored).
template <class T, class I>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const I* targets, T scale,
                            int64_t N, int64_t C, int64_t ignore_index);
template <class T, class I>
void ref_cross_entropy_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                               int64_t C, int64_t ignore_index);
template <class T, class I>
void ref_cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const I* targets,
                                T scale, int64_t N, int64_t C, int64_t ignore_index);

// ---- cross-entropy with label smoothing ε (torch's definition) --------------------------------
// Separate kernels so that the unsmoothed ones above keep their arithmetic. With lse as above:
// losses[n] = lse[n] − (1 − ε)·logits[n, t_n] − (ε / C)·Σ_c logits[n, c] (0 where ignored), i.e.
// (1 − ε)·(−log p[t]) + ε·mean_c(−log p[c]).
template <class T, class I>
void cross_entropy_smoothed_forward(T* losses, T* lse, const T* logits, const I* targets, int64_t N,
                                    int64_t C, int64_t ignore_index, double smoothing);
// dlogits[n, c] += scale · (exp(logits[n, c] − lse[n]) − ε/C − (1 − ε)·[c == t_n]), kept rows.
template <class T, class I>
void cross_entropy_smoothed_backward(T* dlogits, const T* logits, const T* lse, const I* targets,
                                     T scale, int64_t N, int64_t C, int64_t ignore_index,
                                     double smoothing);
template <class T, class I>
void ref_cross_entropy_smoothed_forward(T* losses, T* lse, const T* logits, const I* targets,
                                        int64_t N, int64_t C, int64_t ignore_index,
                                        double smoothing);
template <class T, class I>
void ref_cross_entropy_smoothed_backward(T* dlogits, const T* logits, const T* lse,
                                         const I* targets, T scale, int64_t N, int64_t C,
                                         int64_t ignore_index, double smoothing);

// ---- linear + cross-entropy (the language-model head) ---------------------------------------
// The fused linear head + cross-entropy of a language model: the mean next-token loss of
// logits = x·Wᵀ without ever holding the [N, V] logits or their gradient. Forward and backward
// walk the vocabulary in column chunks of a caller-given scratch buffer [N, chunk]: each chunk's
// logits come from one GEMM (tensor/kernels_matmul.h, bit-identical at any thread count), the
// forward folds them into a running max and sum per row (an online logsumexp), and the backward
// recomputes them, turns them into scale·(softmax − onehot) in place and adds that chunk's share
// of dW (complete: every row) and dx (a partial sum over the chunk's columns). Every output
// element has one owner thread and a fixed summation order, so float32 results do not depend on
// the thread count. ref_* versions are plain loops over the full logits, for the tests.

// The op's chunk width (autograd/ops_loss.cpp): a scratch buffer of about kLmHeadScratch elements
// (16 MiB of float32), i.e. kLmHeadScratch / N columns rounded down to a multiple of 16, at
// least 16 and at most V. For the base model (N = 1024) that is 4096 columns.
constexpr int64_t kLmHeadScratch = int64_t(1) << 22;
int64_t lm_head_chunk(int64_t N, int64_t V);

// x [N, D], W [V, D], targets [N] -> losses [N] (0 for rows whose target is ignore_index),
// lse [N] = log Σ_v exp((x·Wᵀ)[n, v]). Columns are taken `chunk` at a time (chunk >= 1);
// scratch holds N·chunk elements.
template <class T, class I>
void lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const I* targets, int64_t N,
                        int64_t D, int64_t V, int64_t ignore_index, int64_t chunk, T* scratch);
// With G[n, v] = scale·(exp((x·Wᵀ)[n, v] − lse[n]) − [v == t_n]) for rows not ignored, 0 else:
// dx [N, D] += G·W and dW [V, D] += Gᵀ·x (either may be null: not needed). When one chunk
// covers the vocabulary (chunk >= V) and scratch_has_logits is set, scratch still holds the
// forward's logits [N, V] and they are used instead of recomputed (small vocabularies).
template <class T, class I>
void lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse, const I* targets,
                         T scale, int64_t N, int64_t D, int64_t V, int64_t ignore_index,
                         int64_t chunk, T* scratch, bool scratch_has_logits = false);

// The same contracts over the full logits, accumulated in double (no scratch).
template <class T, class I>
void ref_lm_head_ce_forward(T* losses, T* lse, const T* x, const T* W, const I* targets, int64_t N,
                            int64_t D, int64_t V, int64_t ignore_index);
template <class T, class I>
void ref_lm_head_ce_backward(T* dx, T* dW, const T* x, const T* W, const T* lse, const I* targets,
                             T scale, int64_t N, int64_t D, int64_t V, int64_t ignore_index);

}  // namespace dg
