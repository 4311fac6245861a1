// What the kernel test files share: the tolerance of a fast kernel against its reference per
// element type, an element-wise comparison that names the failing index, and the exact dyadic
// input patterns the torch goldens were generated from. Test support only.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

// Relative tolerance of a fast kernel against its plain reference: float32 and float64.
template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// |got − want| ≤ tolerance · max(1, |want|) element by element, naming the index that fails.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
                        double tolerance) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= tolerance * std::max(1.0, std::fabs(want[i])));
  }
}

// n exact values ((k·mul) mod m − shift) / div: dyadic rationals when div is a power of two, so
// depthgrad and torch start from the same bits.
inline std::vector<double> pattern(int64_t n, int mul, int mod, int shift, double div) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * mul) % mod - shift) / div;
  return v;
}

// n values uniform in [-1, 1) from `seed` (std::mt19937_64), as T.
template <class T>
std::vector<T> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}
