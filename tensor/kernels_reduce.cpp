// Max / min and cumsum along one axis (see kernels_reduce.h): the fast kernels (parallel over
// outer rows, the inner axis scanned in unit stride) and their plain references, serial triple
// loops. max/min do no arithmetic; cumsum adds in the reference's order: fast and reference agree
// bit for bit at any thread count.
#include "tensor/kernels_reduce.h"

#include <cmath>
#include <vector>

#include "tensor/kernels_elementwise.h"  // kParallelGrain

namespace dg {

namespace {
// Whether v replaces best as the running extreme: strictly better, or the first NaN.
template <class T>
inline bool better(T v, T best, bool is_max) {
  if (std::isnan(best)) return false;
  if (std::isnan(v)) return true;
  return is_max ? v > best : v < best;
}
}  // namespace

// x [outer, C, inner] -> values, indices [outer, inner]
template <class T>
void max_dim_forward(T* values, int64_t* indices, const T* x, int64_t outer, int64_t C,
                     int64_t inner, bool is_max) {
#pragma omp parallel for if (outer * C * inner > kParallelGrain && outer > 1) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    const T* row = x + o * C * inner;
    int64_t* idx = indices + o * inner;
    for (int64_t i = 0; i < inner; ++i) idx[i] = 0;
    if (inner == 1) {  // one contiguous row
      T best = row[0];
      for (int64_t c = 1; c < C; ++c)
        if (better(row[c], best, is_max)) best = row[c], idx[0] = c;
    } else {  // C rows of `inner` elements each, compared with row 0..c-1's best so far
      for (int64_t c = 1; c < C; ++c)
        for (int64_t i = 0; i < inner; ++i)
          if (better(row[c * inner + i], row[idx[i] * inner + i], is_max)) idx[i] = c;
    }
    if (values)
      for (int64_t i = 0; i < inner; ++i) values[o * inner + i] = row[idx[i] * inner + i];
  }
}
template decltype(max_dim_forward<float>) max_dim_forward<float>;
template decltype(max_dim_forward<double>) max_dim_forward<double>;

// Reference: for every (o, i), scan c = 0..C-1.
template <class T>
void ref_max_dim_forward(T* values, int64_t* indices, const T* x, int64_t outer, int64_t C,
                         int64_t inner, bool is_max) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (better(x[(o * C + c) * inner + i], x[(o * C + best) * inner + i], is_max)) best = c;
      indices[o * inner + i] = best;
      if (values) values[o * inner + i] = x[(o * C + best) * inner + i];
    }
}
template decltype(ref_max_dim_forward<float>) ref_max_dim_forward<float>;
template decltype(ref_max_dim_forward<double>) ref_max_dim_forward<double>;

// cumsum: a running sum per column in double (torch's CPU accumulator for float32 too), each
// output row written as the running sum after adding x's row c, `inner` wide.
template <class T>
void cumsum_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool reverse) {
#pragma omp parallel for if (outer * C * inner > kParallelGrain && outer > 1) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<double> running(static_cast<size_t>(inner), 0.0);
    for (int64_t step = 0; step < C; ++step) {
      const int64_t row = (o * C + (reverse ? C - 1 - step : step)) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        running[i] += static_cast<double>(x[row + i]);
        out[row + i] = static_cast<T>(running[i]);
      }
    }
  }
}
template decltype(cumsum_forward<float>) cumsum_forward<float>;
template decltype(cumsum_forward<double>) cumsum_forward<double>;

// Reference: for every (o, i), a running sum down the column.
template <class T>
void ref_cumsum_forward(T* out, const T* x, int64_t outer, int64_t C, int64_t inner, bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double running = 0;
      for (int64_t step = 0; step < C; ++step) {
        const int64_t at = (o * C + (reverse ? C - 1 - step : step)) * inner + i;
        running += static_cast<double>(x[at]);
        out[at] = static_cast<T>(running);
      }
    }
}
template decltype(ref_cumsum_forward<float>) ref_cumsum_forward<float>;
template decltype(ref_cumsum_forward<double>) ref_cumsum_forward<double>;

}  // namespace dg
