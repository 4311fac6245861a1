// Softmax and log_softmax kernels (see kernels_softmax.h): the fast forward, its plain reference,
// the fast backward and its reference. Row statistics are accumulated in double; outputs are
// stored in T.
// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)
#include "tensor/kernels_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/fast_math.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/threads.h"              // parallel_for

namespace dg {

// ============================================================================================
// softmax / log_softmax
// ============================================================================================

namespace {
// One row of C elements at stride `s` (1 on the fast path, where the compiler specialises it).
template <class T>
inline void softmax_row(T* o, const T* x, int64_t C, int64_t s, bool log) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t c = 0; c < C; ++c) m = m < x[c * s] ? x[c * s] : m;  // std::max, vectorised
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) {
    const T e = exp_fast(x[c * s] - m);
    o[c * s] = e;
    sum += e;
  }
  if (log) {
    const T lsum = static_cast<T>(std::log(sum));
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c * s] = (x[c * s] - m) - lsum;
  } else {
    const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c * s] *= inv;
  }
}

template <class T>
inline void softmax_backward_row(T* dx, const T* dy, const T* y, int64_t C, int64_t s, bool log) {
  double acc = 0.0;
  if (log) {
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < C; ++c) acc += dy[c * s];
    const T total = static_cast<T>(acc);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c * s] += dy[c * s] - exp_fast(y[c * s]) * total;
  } else {
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(dy[c * s]) * y[c * s];
    const T dot = static_cast<T>(acc);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dx[c * s] += y[c * s] * (dy[c * s] - dot);
  }
}
}  // namespace

// x, out [outer, C, inner]
template <class T>
void softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log) {
  const bool par = outer * C * inner > kParallelGrain;
  if (inner == 1)
    return parallel_for(outer, par,
                        [&](int64_t r) { softmax_row(out + r * C, x + r * C, C, 1, log); });
  parallel_for(outer * inner, par, [&](int64_t r) {
    const int64_t base = (r / inner) * C * inner + r % inner;
    softmax_row(out + base, x + base, C, inner, log);
  });
}
template decltype(softmax_forward<float>) softmax_forward<float>;
template decltype(softmax_forward<double>) softmax_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_softmax_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool log) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) { return o * C * inner + c * inner + i; };
      double m = -INFINITY, sum = 0.0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x[at(c)]));
      for (int64_t c = 0; c < C; ++c) sum += std::exp(x[at(c)] - m);
      for (int64_t c = 0; c < C; ++c)
        out[at(c)] =
            static_cast<T>(log ? x[at(c)] - m - std::log(sum) : std::exp(x[at(c)] - m) / sum);
    }
}
template decltype(ref_softmax_forward<float>) ref_softmax_forward<float>;
template decltype(ref_softmax_forward<double>) ref_softmax_forward<double>;

// dx, dy, y [outer, C, inner]
template <class T>
void softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                      bool log) {
  const bool par = outer * C * inner > kParallelGrain;
  if (inner == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t r = 0; r < outer; ++r)
      softmax_backward_row(dx + r * C, dy + r * C, y + r * C, C, 1, log);
    return;
  }
#pragma omp parallel for if (par) schedule(static)
  for (int64_t r = 0; r < outer * inner; ++r) {
    const int64_t base = (r / inner) * C * inner + r % inner;
    softmax_backward_row(dx + base, dy + base, y + base, C, inner, log);
  }
}
template decltype(softmax_backward<float>) softmax_backward<float>;
template decltype(softmax_backward<double>) softmax_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_softmax_backward(T* dx, const T* dy, const T* y, int64_t outer, int64_t C, int64_t inner,
                          bool log) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) { return o * C * inner + c * inner + i; };
      double acc = 0.0;
      for (int64_t c = 0; c < C; ++c)
        acc += log ? dy[at(c)] : static_cast<double>(dy[at(c)]) * y[at(c)];
      for (int64_t c = 0; c < C; ++c) {
        const double g = dy[at(c)], yc = y[at(c)];
        dx[at(c)] += static_cast<T>(log ? g - std::exp(yc) * acc : yc * (g - acc));
      }
    }
}
template decltype(ref_softmax_backward<float>) ref_softmax_backward<float>;
template decltype(ref_softmax_backward<double>) ref_softmax_backward<double>;

}  // namespace dg
