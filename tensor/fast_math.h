// Vectorisable elementary functions shared by the kernels (softmax, cross-entropy, attention).
// Only what libm cannot give us without fast-math; no approximations beyond the documented error.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dg {

// e^x in float32 that vectorises under `omp simd` (libm's expf does not without fast-math):
// e^x = 2^k · e^r with k = round(x·log2 e), r = x − k·ln 2 (ln 2 split into a part exact in
// float and a small rest), e^r from its degree-7 Taylor polynomial on |r| ≤ ln2/2. Error ≤ 2 ulp
// (tested; measured 1.06). exp_f32(0) = 1; x < −87 (and −inf) give 0; x > 88 gives +inf; NaN
// stays NaN. Plain arithmetic only, so deterministic. Double uses std::exp (the gradcheck type).
inline float exp_f32(float x) {
  float xc = x >= -87.0f ? x : -87.0f;  // NaN clamps too: casting a NaN k to int would be UB
  xc = xc > 88.0f ? 88.0f : xc;
  // round to nearest by adding and subtracting 1.5·2²³ (floorf does not vectorise here)
  const float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.0f / 5040;  // Taylor: 1 + r + r²/2! + ... + r⁷/7!; the r⁸/8! term is < 1e-8 here
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r * r + r + 1.0f;
  float y = p * std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
  y = x < -87.0f ? 0.0f : y;
  y = x > 88.0f ? INFINITY : y;
  return x != x ? x : y;
}
template <class T>
inline T exp_fast(T x) {
  if constexpr (sizeof(T) == 4)
    return exp_f32(x);
  else
    return std::exp(x);
}

// Of a row x [n]: its max m and Σ_j e^(x_j − m) accumulated in double, both vectorised
// (the two halves of a logsumexp: lse = m + log(sum)). Fixed order, so deterministic.
// The max is written `m < x ? x : m`, which is std::max's definition: GCC vectorises that form
// of a max reduction but not the call to std::max (about 14x slower on a 512-wide row).
template <class T>
inline void max_and_sum_exp(const T* x, int64_t n, T& m, double& sum) {
  T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = mx < x[j] ? x[j] : mx;
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += exp_fast(x[j] - mx);
  m = mx;
  sum = s;
}

}  // namespace dg
