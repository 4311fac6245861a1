// Softmax and log_softmax over one axis of [outer, C, inner], llm.c style: the forward beside its
// backward, which ADDS into its gradient output, and ref_* versions (plain loops) the tests compare
// against. Every output element has one owner thread, so float32 results are bit-identical at any
// thread count. These kernels do not check shapes or dtypes and do not record autograd
// (autograd/ops_softmax.cpp does). The losses built on softmax are in kernels_loss.h.
// All pointers are to contiguous row-major buffers.
#pragma once
#include <cstdint>

namespace dg {

// ---- softmax / log_softmax ------------------------------------------------------------------
// x, out [outer, C, inner]: softmax (or log_softmax when `log`) over C. inner == 1 (the last
// axis) is the contiguous fast path; otherwise each (outer, inner) row is read with stride inner.
template <class T>
void softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log);
// y = forward output, dy its gradient [outer, C, inner].
// softmax:     dx += y ⊙ (dy − Σ_c dy·y)      log_softmax: dx += dy − exp(y)·Σ_c dy
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                      bool log);
template <class T>
void ref_softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log);
template <class T>
void ref_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                          bool log);

}  // namespace dg
