// Helpers the op files share (autograd/ops_*.cpp only): argument checks and row counts, the unary
// maps of the elementwise and activation ops, plus the fast kernels' gradient buffers
// (autograd/grad_sink.h). Not part of the public API: programs use autograd/ops.h.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/grad_sink.h"
#include "autograd/tape.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_pointwise.h"
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

// out = f(a) elementwise as a fresh contiguous tensor, not recorded (the op records its backward).
template <class F>
Tensor unary(const Tensor& a, const char* op, F f) {
  Tensor in = a.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op,
                 [&]<class T>() { unary_kernel<T>(in, out, [&](T x) { return f(x); }); });
  return out;
}

// y = f(x) with the pointwise kernel of `kind`, recording a backward that reads x and y: the
// activations (ops_activation.cpp, where it is defined) and abs, clamp, pow (ops_elementwise.cpp).
Tensor unary_pointwise(const Tensor& a, UnaryOp kind, UnaryArgs args, const char* op);

}  // namespace dg
