// Max / min along one axis returning values and the first index of the extreme (NaN counts as the
// extreme, as torch's max/min/argmax propagate NaN), and the running sum along one axis (cumsum,
// forward or reversed), each fast kernel beside its plain reference.
// These kernels do not check shapes or dtypes and do not record autograd
// (autograd/ops_reduce.cpp does); the backward is tensor/kernels_index.h's gather_backward.
#pragma once
#include <cstdint>

namespace dg {

// x [outer, C, inner] (C >= 1) -> values [outer, inner] (may be null: indices only) and
// indices [outer, inner]: the first c holding the max (is_max) or min of x[o, :, i]; a NaN wins
// over any number, the first NaN over later ones. Each output element has one owner thread.
template <class T>
void max_dim_forward(T* values, int64_t* indices, const T* x, int64_t outer, int64_t C,
                     int64_t inner, bool is_max);
template <class T>
void ref_max_dim_forward(T* values, int64_t* indices, const T* x, int64_t outer, int64_t C,
                         int64_t inner, bool is_max);

// x [outer, C, inner] -> out [outer, C, inner], out[o, c, i] = Σ x[o, k, i] over k ≤ c (reverse:
// k ≥ c), accumulated in double in order of k from the start (reverse: from the end), as torch's
// CPU cumsum, so fast and reference agree bit for bit at any thread count. Each (o, i) column has
// one owner thread. out must not alias x.
template <class T>
void cumsum_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool reverse);
template <class T>
void ref_cumsum_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool reverse);

}  // namespace dg
