// Max / min along one axis returning values and the first index of the extreme (NaN counts as the
// extreme, as torch's max/min/argmax propagate NaN), the fast kernel beside its plain reference.
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

}  // namespace dg
