// Elementwise and reduction kernels, and two fused elementwise ones (SwiGLU, the depth mix,
// declared at the end). Each loop is written so the compiler can vectorise it
// (`omp simd`), with OpenMP over outer loops where every output element has one owner thread,
// so results do not depend on the thread count. Plain reference versions (ref_*) sit beside
// the fast ones and the tests check one against the other.
// These kernels do not record autograd; autograd/ops_arithmetic.cpp and autograd/ops_unary.cpp wrap
// them.
#pragma once
#include <cmath>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// Up to this many elements a loop runs on the calling thread: waking the other threads of a
// parallel region costs about 20 µs with passive waiting on an idle machine (more on a busy one),
// while 2^17 elements take some 30-300 µs on one core, the cheaper maps at the low end. A loop
// parallel over its elements is written `parallel for simd if (parallel : ...)`: an `if` without
// the modifier would also switch off vectorisation whenever it is false.
constexpr int64_t kParallelGrain = 1 << 17;

// out = f(a, b) with numpy broadcasting; out must be contiguous with the broadcast shape.
template <class T, class F>
void binary_kernel(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const int64_t n = out.numel();
  T* o = out.data<T>();
  if (a.shape() == out.shape() && b.shape() == out.shape() && a.is_contiguous() &&
      b.is_contiguous()) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
    return;
  }
  // General case: walk the output row by row (last axis innermost) with broadcast strides.
  const Shape& shape = out.shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (n == 0) return;
  const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
  const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
  const int64_t inner = rank ? shape[rank - 1] : 1;
  const int64_t rows = n / inner;
  const int64_t ia = rank ? sa[rank - 1] : 0, ib = rank ? sb[rank - 1] : 0;
  const T* base_a = static_cast<const T*>(a.storage()->data()) + a.offset();
  const T* base_b = static_cast<const T*>(b.storage()->data()) + b.offset();
#pragma omp parallel for if (n > kParallelGrain) schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offa = 0, offb = 0, rest = row;
    for (int64_t k = rank - 2; k >= 0; --k) {
      int64_t idx = rest % shape[k];
      rest /= shape[k];
      offa += idx * sa[k];
      offb += idx * sb[k];
    }
    const T* ra = base_a + offa;
    const T* rb = base_b + offb;
    T* ro = o + row * inner;
    // The common inner strides get loops the compiler vectorises (a stride it does not know
    // keeps the loop scalar): both operands contiguous, or one of them a scalar along the row.
    if (ia == 1 && ib == 1) {
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j], rb[j]);
    } else if (ia == 1 && ib == 0) {
      const T vb = rb[0];
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j], vb);
    } else if (ia == 0 && ib == 1) {
      const T va = ra[0];
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(va, rb[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j * ia], rb[j * ib]);
    }
  }
}

// out = f(a) for contiguous a and out of the same shape.
template <class T, class F>
void unary_kernel(const Tensor& a, Tensor& out, F f) {
  const int64_t n = out.numel();
  const T* pa = a.data<T>();
  T* o = out.data<T>();
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i]);
}

// target += g, summing g over the axes along which target's shape was broadcast to g's shape.
// target must be contiguous; g any layout whose shape is a broadcast of target's.
void add_reduced_into(Tensor& target, const Tensor& g);
void ref_add_reduced_into(Tensor& target, const Tensor& g);

// Sum over `axes` (already normalised, sorted, unique). Output shape keeps size-1 axes when
// keepdim.
Tensor sum_axes(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim);
Tensor ref_sum_axes(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim);

// ---- SwiGLU ---------------------------------------------------------------------------------
// gate, up, out [n]: out = silu(gate)·up with silu(x) = x / (1 + e^−x) (e^x by exp_fast in float).
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
// With s = σ(gate): dgate = dout·up·s·(1 + gate·(1 − s)), dup = dout·silu(gate). Each gradient
// (null: skip) is added into, or written when its `overwrite` flag is set (a fresh buffer).
template <class T>
void swiglu_backward(T* dgate, bool overwrite_gate, T* dup, bool overwrite_up, const T* dout,
                     const T* gate, const T* up, int64_t n);
// Reference: the same formulas in double with std::exp, adding into both gradients.
template <class T>
void ref_swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void ref_swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

// ---- depth mix ------------------------------------------------------------------------------
// S: J pointers to [rows, D]; alpha [rows, J] -> out [rows, D] = Σ_j alpha[:, j] · S_j (j in
// order).
template <class T>
void depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                       int64_t D);
// dS[j] (null: skip) += alpha[:, j] · dout; dalpha [rows, J] (null: skip) += <dout, S_j> per row.
// Two dS[j] may point to the same buffer (a source passed twice).
template <class T>
void depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S, const T* alpha,
                        int64_t rows, int64_t J, int64_t D);
template <class T>
void ref_depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                           int64_t D);
template <class T>
void ref_depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S,
                            const T* alpha, int64_t rows, int64_t J, int64_t D);

}  // namespace dg
