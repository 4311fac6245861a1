// Pointwise kernels: activations (relu, leaky_relu, sigmoid, tanh, softplus, abs, clamp, pow by a
// scalar), the binary pow/minimum/maximum, where, and comparisons. Fast loops (`omp simd`, OpenMP
// over elements, one owner thread per output element) beside plain double-precision ref_* twins.
// No broadcasting here except binary_pointwise_forward: the ops expand inputs to the output shape.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace dg {

// ---- unary: y = f(x) ----------------------------------------------------------------------
enum class UnaryOp : uint8_t { relu, leaky_relu, sigmoid, tanh, softplus, abs, clamp, pow };
// The op's scalars: leaky_relu a = negative slope; softplus a = beta, b = threshold; clamp a = min,
// b = max (−inf / +inf when absent); pow a = exponent. Others ignore them.
struct UnaryArgs {
  double a = 0, b = 0;
};
// x, y [n]: y = f(x). Derivatives follow torch, kinks included: relu' = 0 and leaky_relu' = slope
// at 0; abs' = sign(x) (0 at 0); clamp' = 1 where min <= x <= max; pow' = 0 when exponent is 0.
// Float32 sigmoid uses exp_f32; pow 2, 3, −1, −2, 0.5, −0.5 are products/sqrt (as torch).
template <class T>
void pointwise_forward(UnaryOp op, UnaryArgs args, T* y, const T* x, int64_t n);
// dx [n] = dy · f'(x) (overwrites dx); y = f(x) as the forward gave it.
template <class T>
void pointwise_backward(UnaryOp op, UnaryArgs args, T* dx, const T* dy, const T* x, const T* y,
                        int64_t n);
// Reference: the textbook formulas in double with libm (std::pow for every exponent), serially.
template <class T>
void ref_pointwise_forward(UnaryOp op, UnaryArgs args, T* y, const T* x, int64_t n);
template <class T>
void ref_pointwise_backward(UnaryOp op, UnaryArgs args, T* dx, const T* dy, const T* x, int64_t n);

// ---- binary: y = f(a, b) --------------------------------------------------------------------
enum class BinaryOp : uint8_t { pow, minimum, maximum };
// out (contiguous, the broadcast shape) = f(a, b), numpy broadcasting. minimum/maximum return NaN
// when either input is NaN (as torch).
void binary_pointwise_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// a, b, y, dy [n] (a and b expanded to the output); da, db (null: skip) overwritten with
//   pow:     da = dy·b·a^(b−1) (0 where b = 0), db = dy·y·ln a (0 where a = 0 and b >= 0)
//   maximum: da = dy where a > b, dy/2 where a = b, else 0; db the mirror (minimum: swap > and <).
template <class T>
void binary_pointwise_backward(BinaryOp op, T* da, T* db, const T* dy, const T* a, const T* b,
                               const T* y, int64_t n);
// Reference: a, b, y [n] of one shape, in double, serially.
template <class T>
void ref_binary_pointwise_forward(BinaryOp op, T* y, const T* a, const T* b, int64_t n);
template <class T>
void ref_binary_pointwise_backward(BinaryOp op, T* da, T* db, const T* dy, const T* a, const T* b,
                                   int64_t n);

// ---- where and comparisons (plain loops: no reference twin) -----------------------------------
// cond (bool), a, b, out [n]: out = cond ? a : b.
template <class T>
void where_forward(T* out, const bool* cond, const T* a, const T* b, int64_t n);
// da = cond ? dy : 0, db = cond ? 0 : dy (each null: skip; overwritten).
template <class T>
void where_backward(T* da, T* db, const T* dy, const bool* cond, int64_t n);

enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge };
// out [n] = a op b; a, b [n] of type I (float, double, int32_t, int64_t, bool, uint8_t), out of
// type O (bool, as torch's comparisons; float and double also instantiated for I float/double).
template <class I, class O>
void compare_kernel(CompareOp op, O* out, const I* a, const I* b, int64_t n);
// out [n] = a op s, compared in double (the op rounds s to a's type first, as torch).
template <class I, class O>
void compare_scalar_kernel(CompareOp op, O* out, const I* a, double s, int64_t n);

}  // namespace dg
