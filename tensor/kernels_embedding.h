// Embedding kernels: a row gather forward, a scatter-add backward whose every vocabulary row has
// one owner thread (bit-identical at any thread count), and the plain reference beside it.
// These kernels do not check ids or shapes and do not record autograd (autograd/ops_embedding.cpp
// does). All pointers are to contiguous row-major buffers. Ids are int32_t or int64_t (I), read in
// place: the same arithmetic, so the same bits, for either.
#pragma once
#include <cstdint>

namespace dg {

// ---- embedding ------------------------------------------------------------------------------
// W [V, D], ids [N] (each in [0, V), checked by the caller) -> out [N, D] = W[ids[n], :]
template <class T, class I>
void embedding_forward(T* out, const I* ids, const T* W, int64_t N, int64_t D);
// dW [V, D] += Σ_{n: ids[n] = v} dout[n, :]. One owner thread per vocabulary row; the tokens of a
// row are added in token order, so the result equals the serial reference bit for bit.
template <class T, class I>
void embedding_backward(T* dW, const T* dout, const I* ids, int64_t N, int64_t V, int64_t D);
template <class T, class I>
void ref_embedding_backward(T* dW, const T* dout, const I* ids, int64_t N, int64_t V, int64_t D);

}  // namespace dg
