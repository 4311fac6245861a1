// Pointwise kernels (see kernels_pointwise.h): each fast loop is vectorisable, split over threads
// by element (one owner each), with its plain double-precision ref_* twin right after it.
#include "tensor/kernels_pointwise.h"

#include <algorithm>
#include <cmath>

#include "tensor/fast_math.h"  // exp_fast (sigmoid)
#include "tensor/kernels_elementwise.h"

namespace dg {

// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)

namespace {

// out[i] = f(i) for i < n: one vectorisable loop, split over threads above kParallelGrain (each
// element written by one thread). The callers' lambdas capture by value: capturing the pointers by
// reference made GCC reload them for every element, a scalar loop (ReLU's backward took 7% of an
// encoder layer's training step).
template <class T, class F>
inline void fill_by(T* out, int64_t n, F f) {
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = f(i);
}

// c ? a : b with both read first: a ternary that reads dy only where it passes compiled to a
// branch per element (mispredicted on half of ReLU's) instead of a vector blend.
template <class T>
inline T select(bool c, T a, T b) {
  return c ? a : b;
}

// out [n] = x^p, with torch's products for the common exponents (2, 3, −2, −1, ±0.5).
template <class T>
void pow_scalar(T* out, const T* x, int64_t n, double p) {
  const T e = static_cast<T>(p);
  if (p == 2)
    fill_by(out, n, [=](int64_t i) { return x[i] * x[i]; });
  else if (p == 3)
    fill_by(out, n, [=](int64_t i) { return x[i] * x[i] * x[i]; });
  else if (p == -2)
    fill_by(out, n, [=](int64_t i) { return T(1) / (x[i] * x[i]); });
  else if (p == -1)
    fill_by(out, n, [=](int64_t i) { return T(1) / x[i]; });
  else if (p == 0.5)
    fill_by(out, n, [=](int64_t i) { return std::sqrt(x[i]); });
  else if (p == -0.5)
    fill_by(out, n, [=](int64_t i) { return T(1) / std::sqrt(x[i]); });
  else
    fill_by(out, n, [=](int64_t i) { return std::pow(x[i], e); });
}

}  // namespace

// ---- unary ----------------------------------------------------------------------------------

// x, y [n]
template <class T>
void pointwise_forward(UnaryOp op, UnaryArgs args, T* y, const T* x, int64_t n) {
  const T a = static_cast<T>(args.a), b = static_cast<T>(args.b);
  switch (op) {
    case UnaryOp::relu:  // NaN stays NaN (x < 0 is false)
      fill_by(y, n, [=](int64_t i) { return x[i] < T(0) ? T(0) : x[i]; });
      return;
    case UnaryOp::leaky_relu:
      fill_by(y, n, [=](int64_t i) { return x[i] > T(0) ? x[i] : x[i] * a; });
      return;
    case UnaryOp::sigmoid:
      fill_by(y, n, [=](int64_t i) { return T(1) / (T(1) + exp_fast(-x[i])); });
      return;
    case UnaryOp::tanh:
      fill_by(y, n, [=](int64_t i) { return std::tanh(x[i]); });
      return;
    case UnaryOp::softplus:  // a = beta, b = threshold: linear above it (torch's formula)
      fill_by(y, n,
              [=](int64_t i) { return x[i] * a > b ? x[i] : std::log1p(std::exp(x[i] * a)) / a; });
      return;
    case UnaryOp::abs:
      fill_by(y, n, [=](int64_t i) { return std::abs(x[i]); });
      return;
    case UnaryOp::clamp:  // a = min, b = max; std::max/min keep a NaN x; min > max gives max
      fill_by(y, n, [=](int64_t i) { return std::min(std::max(x[i], a), b); });
      return;
    case UnaryOp::pow:
      pow_scalar(y, x, n, args.a);
      return;
  }
}
template decltype(pointwise_forward<float>) pointwise_forward<float>;
template decltype(pointwise_forward<double>) pointwise_forward<double>;

// dx, dy, x, y [n]
template <class T>
void pointwise_backward(UnaryOp op, UnaryArgs args, T* dx, const T* dy, const T* x, const T* y,
                        int64_t n) {
  const T a = static_cast<T>(args.a), b = static_cast<T>(args.b);
  switch (op) {
    case UnaryOp::relu:  // torch's threshold_backward on the output
      fill_by(dx, n, [=](int64_t i) { return select(y[i] <= T(0), T(0), dy[i]); });
      return;
    case UnaryOp::leaky_relu:
      fill_by(dx, n, [=](int64_t i) { return x[i] > T(0) ? dy[i] : dy[i] * a; });
      return;
    case UnaryOp::sigmoid:
      fill_by(dx, n, [=](int64_t i) { return dy[i] * (T(1) - y[i]) * y[i]; });
      return;
    case UnaryOp::tanh:
      fill_by(dx, n, [=](int64_t i) { return dy[i] * (T(1) - y[i] * y[i]); });
      return;
    case UnaryOp::softplus:  // σ(βx) written as z / (z + 1), z = e^{βx} (torch's formula)
      fill_by(dx, n, [=](int64_t i) {
        return x[i] * a > b ? dy[i] : dy[i] * std::exp(x[i] * a) / (std::exp(x[i] * a) + T(1));
      });
      return;
    case UnaryOp::abs:  // sign(x), 0 at 0
      fill_by(dx, n,
              [=](int64_t i) { return dy[i] * static_cast<T>((T(0) < x[i]) - (x[i] < T(0))); });
      return;
    case UnaryOp::clamp:  // passes where min <= x <= max, bounds included
      fill_by(dx, n, [=](int64_t i) { return select(x[i] >= a && x[i] <= b, dy[i], T(0)); });
      return;
    case UnaryOp::pow: {  // dy · (p · x^(p−1)); 0 when p = 0
      const double p = args.a;
      if (p == 0) {
        std::fill(dx, dx + n, T(0));
        return;
      }
      pow_scalar(dx, x, n, p - 1);
      fill_by(dx, n, [=](int64_t i) { return dy[i] * (a * dx[i]); });
      return;
    }
  }
}
template decltype(pointwise_backward<float>) pointwise_backward<float>;
template decltype(pointwise_backward<double>) pointwise_backward<double>;

// Reference: the formulas in double, one element after the other.
template <class T>
void ref_pointwise_forward(UnaryOp op, UnaryArgs args, T* y, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    double r = 0;
    switch (op) {
      case UnaryOp::relu:
        r = std::isnan(v) || v > 0 ? v : 0.0;
        break;
      case UnaryOp::leaky_relu:
        r = v > 0 ? v : args.a * v;
        break;
      case UnaryOp::sigmoid:
        r = 1.0 / (1.0 + std::exp(-v));
        break;
      case UnaryOp::tanh:
        r = std::tanh(v);
        break;
      case UnaryOp::softplus:
        r = args.a * v > args.b ? v : std::log(1.0 + std::exp(args.a * v)) / args.a;
        break;
      case UnaryOp::abs:
        r = v < 0 ? -v : v;
        break;
      case UnaryOp::clamp:
        r = std::isnan(v) ? v : std::min(std::max(v, args.a), args.b);
        break;
      case UnaryOp::pow:
        r = std::pow(v, args.a);
        break;
    }
    y[i] = static_cast<T>(r);
  }
}
template decltype(ref_pointwise_forward<float>) ref_pointwise_forward<float>;
template decltype(ref_pointwise_forward<double>) ref_pointwise_forward<double>;

template <class T>
void ref_pointwise_backward(UnaryOp op, UnaryArgs args, T* dx, const T* dy, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], g = dy[i];
    double d = 0;  // f'(v)
    switch (op) {
      case UnaryOp::relu:
        d = v > 0 || std::isnan(v) ? 1 : 0;
        break;
      case UnaryOp::leaky_relu:
        d = v > 0 ? 1 : args.a;
        break;
      case UnaryOp::sigmoid: {
        const double s = 1.0 / (1.0 + std::exp(-v));
        d = s * (1 - s);
        break;
      }
      case UnaryOp::tanh:
        d = 1 - std::tanh(v) * std::tanh(v);
        break;
      case UnaryOp::softplus:
        d = args.a * v > args.b ? 1 : 1.0 / (1.0 + std::exp(-args.a * v));
        break;
      case UnaryOp::abs:
        d = v > 0 ? 1 : v < 0 ? -1 : 0;
        break;
      case UnaryOp::clamp:
        d = v >= args.a && v <= args.b ? 1 : 0;
        break;
      case UnaryOp::pow:
        d = args.a == 0 ? 0 : args.a * std::pow(v, args.a - 1);
        break;
    }
    dx[i] = static_cast<T>(g * d);
  }
}
template decltype(ref_pointwise_backward<float>) ref_pointwise_backward<float>;
template decltype(ref_pointwise_backward<double>) ref_pointwise_backward<double>;

// ---- binary ---------------------------------------------------------------------------------

void binary_pointwise_forward(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "pointwise", [&]<class T>() {
    switch (op) {
      case BinaryOp::pow:
        binary_kernel<T>(a, b, out, [](T x, T e) { return std::pow(x, e); });
        return;
      case BinaryOp::minimum:  // a NaN on either side wins
        binary_kernel<T>(a, b, out, [](T x, T y) { return x < y || x != x ? x : y; });
        return;
      case BinaryOp::maximum:
        binary_kernel<T>(a, b, out, [](T x, T y) { return x > y || x != x ? x : y; });
        return;
    }
  });
}

// da, db, dy, a, b, y [n]
template <class T>
void binary_pointwise_backward(BinaryOp op, T* da, T* db, const T* dy, const T* a, const T* b,
                               const T* y, int64_t n) {
  const T two = T(2);
  switch (op) {
    case BinaryOp::pow:  // torch's pow_backward_self / pow_backward_exponent
      if (da)
        fill_by(da, n, [=](int64_t i) {
          return b[i] == T(0) ? T(0) : dy[i] * (b[i] * std::pow(a[i], b[i] - T(1)));
        });
      if (db)
        fill_by(db, n, [=](int64_t i) {
          return a[i] == T(0) && b[i] >= T(0) ? T(0) : dy[i] * (y[i] * std::log(a[i]));
        });
      return;
    case BinaryOp::maximum:  // ties: half to each side
      if (da)
        fill_by(da, n, [=](int64_t i) {
          return a[i] == b[i] ? dy[i] / two : a[i] < b[i] ? T(0) : dy[i];
        });
      if (db)
        fill_by(db, n, [=](int64_t i) {
          return a[i] == b[i] ? dy[i] / two : a[i] > b[i] ? T(0) : dy[i];
        });
      return;
    case BinaryOp::minimum:
      if (da)
        fill_by(da, n, [=](int64_t i) {
          return a[i] == b[i] ? dy[i] / two : a[i] > b[i] ? T(0) : dy[i];
        });
      if (db)
        fill_by(db, n, [=](int64_t i) {
          return a[i] == b[i] ? dy[i] / two : a[i] < b[i] ? T(0) : dy[i];
        });
      return;
  }
}
template decltype(binary_pointwise_backward<float>) binary_pointwise_backward<float>;
template decltype(binary_pointwise_backward<double>) binary_pointwise_backward<double>;

// Reference: y, a, b [n], in double.
template <class T>
void ref_binary_pointwise_forward(BinaryOp op, T* y, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double u = a[i], v = b[i];
    double r = 0;
    if (std::isnan(u) || std::isnan(v))
      r = op == BinaryOp::pow ? std::pow(u, v) : NAN;
    else if (op == BinaryOp::pow)
      r = std::pow(u, v);
    else
      r = op == BinaryOp::maximum ? std::max(u, v) : std::min(u, v);
    y[i] = static_cast<T>(r);
  }
}
template decltype(ref_binary_pointwise_forward<float>) ref_binary_pointwise_forward<float>;
template decltype(ref_binary_pointwise_forward<double>) ref_binary_pointwise_forward<double>;

template <class T>
void ref_binary_pointwise_backward(BinaryOp op, T* da, T* db, const T* dy, const T* a, const T* b,
                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double u = a[i], v = b[i], g = dy[i];
    double ga = 0, gb = 0;
    if (op == BinaryOp::pow) {
      ga = v == 0 ? 0 : g * v * std::pow(u, v - 1);
      gb = u == 0 && v >= 0 ? 0 : g * std::pow(u, v) * std::log(u);
    } else {
      const bool a_wins = op == BinaryOp::maximum ? u > v : u < v;
      const bool b_wins = op == BinaryOp::maximum ? v > u : v < u;
      ga = u == v ? 0.5 * g : b_wins ? 0 : g;
      gb = u == v ? 0.5 * g : a_wins ? 0 : g;
    }
    if (da) da[i] = static_cast<T>(ga);
    if (db) db[i] = static_cast<T>(gb);
  }
}
template decltype(ref_binary_pointwise_backward<float>) ref_binary_pointwise_backward<float>;
template decltype(ref_binary_pointwise_backward<double>) ref_binary_pointwise_backward<double>;

// ---- where ----------------------------------------------------------------------------------

// out, cond, a, b [n]
template <class T>
void where_forward(T* out, const bool* cond, const T* a, const T* b, int64_t n) {
  fill_by(out, n, [=](int64_t i) { return cond[i] ? a[i] : b[i]; });
}
template decltype(where_forward<float>) where_forward<float>;
template decltype(where_forward<double>) where_forward<double>;

// da, db, dy, cond [n]
template <class T>
void where_backward(T* da, T* db, const T* dy, const bool* cond, int64_t n) {
  if (da) fill_by(da, n, [=](int64_t i) { return select(cond[i], dy[i], T(0)); });
  if (db) fill_by(db, n, [=](int64_t i) { return select(cond[i], T(0), dy[i]); });
}
template decltype(where_backward<float>) where_backward<float>;
template decltype(where_backward<double>) where_backward<double>;

// ---- comparisons ----------------------------------------------------------------------------

// out, a, b [n]
template <class I, class O>
void compare_kernel(CompareOp op, O* out, const I* a, const I* b, int64_t n) {
  switch (op) {
    case CompareOp::eq:
      fill_by(out, n, [=](int64_t i) { return O(a[i] == b[i]); });
      return;
    case CompareOp::ne:
      fill_by(out, n, [=](int64_t i) { return O(a[i] != b[i]); });
      return;
    case CompareOp::lt:
      fill_by(out, n, [=](int64_t i) { return O(a[i] < b[i]); });
      return;
    case CompareOp::le:
      fill_by(out, n, [=](int64_t i) { return O(a[i] <= b[i]); });
      return;
    case CompareOp::gt:
      fill_by(out, n, [=](int64_t i) { return O(a[i] > b[i]); });
      return;
    case CompareOp::ge:
      fill_by(out, n, [=](int64_t i) { return O(a[i] >= b[i]); });
      return;
  }
}

// out, a [n]; s a scalar
template <class I, class O>
void compare_scalar_kernel(CompareOp op, O* out, const I* a, double s, int64_t n) {
  switch (op) {
    case CompareOp::eq:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) == s); });
      return;
    case CompareOp::ne:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) != s); });
      return;
    case CompareOp::lt:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) < s); });
      return;
    case CompareOp::le:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) <= s); });
      return;
    case CompareOp::gt:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) > s); });
      return;
    case CompareOp::ge:
      fill_by(out, n, [=](int64_t i) { return O(double(a[i]) >= s); });
      return;
  }
}

#define DG_COMPARE_INSTANCES(I, O)                              \
  template decltype(compare_kernel<I, O>) compare_kernel<I, O>; \
  template decltype(compare_scalar_kernel<I, O>) compare_scalar_kernel<I, O>;
DG_COMPARE_INSTANCES(float, float)
DG_COMPARE_INSTANCES(double, double)
DG_COMPARE_INSTANCES(float, bool)
DG_COMPARE_INSTANCES(double, bool)
DG_COMPARE_INSTANCES(int32_t, bool)
DG_COMPARE_INSTANCES(int64_t, bool)
DG_COMPARE_INSTANCES(bool, bool)
DG_COMPARE_INSTANCES(uint8_t, bool)
#undef DG_COMPARE_INSTANCES

}  // namespace dg
