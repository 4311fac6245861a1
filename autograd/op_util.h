// Helpers the op files share (autograd/ops_*.cpp only): argument checks and the raw gradient
// pointer a kernel adds into ("accumulate into this", autograd/tape.h). Not part of the public
// API: programs use autograd/ops.h.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/tape.h"
#include "tensor/tensor.h"

namespace dg {

inline void check_float(const Tensor& t, const char* op) {
  check_arg(t.defined(), op, t, "a defined tensor");
  check_arg(is_floating(t.dtype()), op, t, "a float32 or float64 tensor");
}

// The contiguous gradient buffer of t that a kernel adds into (accumulate into this). A strided
// gradient installed by set_grad is refused naming the op (tape.h, rule 3).
template <class T>
T* grad_ptr(const Tensor& t, const char* op) {
  Tensor g = grad_of(t);
  if (!g.is_contiguous())
    throw std::logic_error(
        fmt::format("{}: the gradient of {} is not contiguous", op, t.describe()));
  return g.data<T>();
}

// rows × D for a [.., D] tensor.
inline int64_t rows_of(const Tensor& x) {
  return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1;
}

}  // namespace dg
