// Helpers the op files share (autograd/ops_*.cpp only): argument checks and row counts, plus the
// fast kernels' gradient buffers (autograd/grad_sink.h). Not part of the public API: programs use
// autograd/ops.h.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/grad_sink.h"
#include "autograd/tape.h"
#include "tensor/tensor.h"

namespace dg {

inline void check_float(const Tensor& t, const char* op) {
  check_arg(t.defined(), op, t, "a defined tensor");
  check_arg(is_floating(t.dtype()), op, t, "a float32 or float64 tensor");
}

// rows × D for a [.., D] tensor.
inline int64_t rows_of(const Tensor& x) {
  return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1;
}

}  // namespace dg
