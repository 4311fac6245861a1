// The comparisons (eq, ne, lt, le, gt, ge: bool, after torch's type promotion) and the logical
// and bitwise ops (logical_and/or/xor/not, bitwise_and/or/xor/not and the operators &, |, ^, ~).
// None is recorded: their results are constants to the tape (a mask built from a comparison
// carries no gradient), so this file has no backward and no gradient-check rows. Checks:
// tests/test_kernels_elementwise.cpp and tests/test_elementary_ops.cpp.
#include <fmt/format.h>

#include <stdexcept>
#include <type_traits>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace dg {

// ---- comparisons: bool, after torch's type promotion; never recorded -----------------------
namespace {

// The dtype torch compares a and b in: promote_types, except that a 0-d tensor does not widen a
// tensor with axes of its own kind (float32 [3] vs float64 0-d compares in float32), as torch's
// result_type.
DType compare_dtype(const Tensor& a, const Tensor& b) {
  if ((a.dim() == 0) == (b.dim() == 0)) return promote_types(a.dtype(), b.dtype());
  const Tensor& full = a.dim() == 0 ? b : a;
  const Tensor& zero_d = a.dim() == 0 ? a : b;
  auto kind = [](DType d) { return d == DType::b8 ? 0 : is_floating(d) ? 2 : 1; };
  if (kind(zero_d.dtype()) > kind(full.dtype())) return zero_d.dtype();
  return full.dtype();
}

// a as a contiguous tensor of `shape` and `dtype`, recording nothing.
Tensor compare_input(const Tensor& a, DType dtype, const Shape& shape) {
  return expanded(detach(a).to(dtype), shape);
}

Tensor compare(const Tensor& a, const Tensor& b, CompareOp kind, const char* op) {
  check_arg(a.defined(), op, a, "a defined tensor");
  check_arg(b.defined(), op, b, "a defined tensor");
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const DType dtype = compare_dtype(a, b);
  Tensor ae = compare_input(a, dtype, shape), be = compare_input(b, dtype, shape);
  Tensor out = Tensor::empty(shape, DType::b8);
  dispatch_any(dtype, [&]<class I>() {
    compare_kernel<I, bool>(kind, out.data<bool>(), ae.data<I>(), be.data<I>(), out.numel());
  });
  if (tracing()) trace_op(op, {a, b}, {out});
  return out;
}

// As torch's tensor-scalar comparison: a floating tensor compares with s rounded to its dtype
// (float32 x == 0.1 is true where x holds float32(0.1)); an integer or bool tensor with an
// integral s compares exactly, with a fractional s in float32 (torch's default float).
Tensor compare(const Tensor& a, double s, CompareOp kind, const char* op) {
  check_arg(a.defined(), op, a, "a defined tensor");
  const bool integral = !is_floating(a.dtype()) && (s == std::trunc(s) || !std::isfinite(s));
  if (!is_floating(a.dtype()) && !integral) return compare(a, Tensor::full({}, s), kind, op);
  if (a.dtype() == DType::f32) s = static_cast<double>(static_cast<float>(s));
  Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), DType::b8);
  dispatch_any(a.dtype(), [&]<class I>() {
    compare_scalar_kernel<I, bool>(kind, out.data<bool>(), x.data<I>(), s, out.numel());
  });
  if (tracing()) trace_op(op, {a}, {out}, {{"scalar", s}});
  return out;
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::eq, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::ne, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::lt, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::le, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::gt, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, CompareOp::ge, "ge"); }
Tensor eq(const Tensor& a, double b) { return compare(a, b, CompareOp::eq, "eq"); }
Tensor ne(const Tensor& a, double b) { return compare(a, b, CompareOp::ne, "ne"); }
Tensor lt(const Tensor& a, double b) { return compare(a, b, CompareOp::lt, "lt"); }
Tensor le(const Tensor& a, double b) { return compare(a, b, CompareOp::le, "le"); }
Tensor gt(const Tensor& a, double b) { return compare(a, b, CompareOp::gt, "gt"); }
Tensor ge(const Tensor& a, double b) { return compare(a, b, CompareOp::ge, "ge"); }

// ---- logical and bitwise ops: never recorded -------------------------------------------------
namespace {
enum class Logic : uint8_t { and_, or_, xor_ };

template <class T>
T logic_apply(Logic kind, T x, T y) {
  switch (kind) {
    case Logic::and_:
      return x & y;
    case Logic::or_:
      return x | y;
    case Logic::xor_:
      return x ^ y;
  }
  return x;
}

// a op b elementwise over the broadcast shape, both read as `dtype` (bool: nonzero is true).
Tensor logic(const Tensor& a, const Tensor& b, Logic kind, DType dtype, const char* op) {
  check_arg(a.defined(), op, a, "a defined tensor");
  check_arg(b.defined(), op, b, "a defined tensor");
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor ae = compare_input(a, dtype, shape), be = compare_input(b, dtype, shape);
  Tensor out = Tensor::empty(shape, dtype);
  dispatch_any(dtype, [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      const T *x = ae.data<T>(), *y = be.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = static_cast<T>(logic_apply(kind, x[i], y[i]));
    }
  });
  if (tracing()) trace_op(op, {a, b}, {out});
  return out;
}

// torch's bitwise ops: bool with bool is logical, integers bitwise (promoted), floats refused.
Tensor bitwise(const Tensor& a, const Tensor& b, Logic kind, const char* op, const char* logical,
               const char* symbol) {
  check_arg(a.defined(), op, a, "a defined tensor");
  check_arg(b.defined(), op, b, "a defined tensor");
  if (is_floating(a.dtype()) || is_floating(b.dtype()))
    throw std::invalid_argument(fmt::format(
        "{}: takes bool or integer tensors, got {} and {}; for a truth value write dg::{}(a, b), "
        "or compare first (dg::gt(x, 0) {} ...)",
        op, a.describe(), b.describe(), logical, symbol));
  return logic(a, b, kind, compare_dtype(a, b), op);
}
}  // namespace

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logic(a, b, Logic::and_, DType::b8, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logic(a, b, Logic::or_, DType::b8, "logical_or");
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return logic(a, b, Logic::xor_, DType::b8, "logical_xor");
}
Tensor logical_not(const Tensor& a) {
  check_arg(a.defined(), "logical_not", a, "a defined tensor");
  return eq(a, 0.0);  // not nonzero; NaN is nonzero, so false
}
Tensor bitwise_and(const Tensor& a, const Tensor& b) {
  return bitwise(a, b, Logic::and_, "bitwise_and", "logical_and", "&");
}
Tensor bitwise_or(const Tensor& a, const Tensor& b) {
  return bitwise(a, b, Logic::or_, "bitwise_or", "logical_or", "|");
}
Tensor bitwise_xor(const Tensor& a, const Tensor& b) {
  return bitwise(a, b, Logic::xor_, "bitwise_xor", "logical_xor", "^");
}
Tensor bitwise_not(const Tensor& a) {
  const char* op = "bitwise_not";
  check_arg(a.defined(), op, a, "a defined tensor");
  if (is_floating(a.dtype()))
    throw std::invalid_argument(
        fmt::format("bitwise_not: takes a bool or integer tensor, got {}; for a truth value write "
                    "dg::logical_not(x)",
                    a.describe()));
  if (a.dtype() == DType::b8) return logical_not(a);
  Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_any(a.dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = x.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<T>(~p[i]);
    }
  });
  return out;
}
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }

}  // namespace dg
