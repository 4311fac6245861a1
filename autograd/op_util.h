// Helpers the op files share (autograd/ops_*.cpp only): argument checks and row counts, the unary
// maps of the elementwise and activation ops, plus the fast kernels' gradient buffers
// (autograd/grad_sink.h). Not part of the public API: programs use autograd/ops.h.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/grad_sink.h"
#include "autograd/op_trace.h"
#include "autograd/tape.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_pointwise.h"
#include "tensor/tensor.h"

namespace dg {

inline void check_float(const Tensor& t, const char* op) {
  check_arg(t.defined(), op, t, "a defined tensor");
  check_arg(is_floating(t.dtype()), op, t, "a float32 or float64 tensor");
}

// Indices (ids, targets, gather indices) are int64, as torch's, or int32: calls
// f.template operator()<I>() with I = int64_t or int32_t, so a kernel reads them in place (no
// conversion copy). `what` names the argument in the error ("ids", "targets", "an index").
template <class F>
decltype(auto) dispatch_index(const Tensor& index, const char* op, const char* what, F&& f) {
  check_arg(index.defined() && (index.dtype() == DType::i64 || index.dtype() == DType::i32), op,
            index, fmt::format("int64 or int32 {}", what));
  if (index.dtype() == DType::i64) return f.template operator()<int64_t>();
  return f.template operator()<int32_t>();
}

// A contiguous tensor of t's values for a kernel to read in an op's forward: t itself when
// contiguous, else a copy that records nothing. The op records itself on t; t.contiguous() would
// also record a "contiguous" node (as torch's), one nobody reaches.
inline Tensor kernel_input(const Tensor& t) {
  return t.is_contiguous() ? t : detach(t).contiguous();
}

// rows × D for a [.., D] tensor.
inline int64_t rows_of(const Tensor& x) {
  return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1;
}

// out = f(a) elementwise as a fresh contiguous tensor, not recorded (the op records its backward).
template <class F>
Tensor unary(const Tensor& a, const char* op, F f) {
  Tensor in = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op,
                 [&]<class T>() { unary_kernel<T>(in, out, [&](T x) { return f(x); }); });
  if (tracing()) trace_op(op, {a}, {out});
  return out;
}

// y = f(x) with the pointwise kernel of `kind`, recording a backward that reads x and y: the
// activations (ops_activation.cpp, where it is defined) and abs, clamp, pow (ops_unary.cpp).
Tensor unary_pointwise(const Tensor& a, UnaryOp kind, UnaryArgs args, const char* op);

// t broadcast to `shape` as a contiguous tensor (t itself when it already is): the elementwise
// ops' inputs (ops_arithmetic.cpp, where it is defined, and ops_compare.cpp).
Tensor expanded(const Tensor& t, const Shape& shape);

// Refuses Reduction::batchmean (kl_div's only, as torch's), naming `op`: every other loss calls it
// (ops_loss.cpp, where it is defined, and ops_loss_regression.cpp).
enum class Reduction;  // autograd/ops.h
void check_reduction(Reduction reduction, const char* op);

}  // namespace dg
