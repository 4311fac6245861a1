// Helpers shared by the tests: seeded random vectors and indices, the relative difference the
// fast-vs-reference checks use, byte equality and the 1-vs-2-thread check built on it, a guard that
// restores the thread count, and the message of a thrown error. Test code only; nothing here is
// part of the library.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/threads.h"

namespace dg::test {

// n values uniform in [lo, hi) from a seeded mt19937_64, converted to T.
template <class T>
std::vector<T> rand_vec(int64_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// max |a − b| / max(1, max |b|); a NaN on one side only gives infinity.
template <class T>
double rel_diff(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(static_cast<double>(a[i])) != std::isnan(static_cast<double>(b[i])))
      return INFINITY;
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return err / scale;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// n integers uniform in [0, bound) from a seeded mt19937_64 (token ids, gather indices), as T.
template <class T>
std::vector<T> rand_ints(int64_t n, int64_t bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(rng() % static_cast<uint64_t>(bound));
  return v;
}

// run(threads) returns a list of output vectors; at 1 and at 2 threads they must be the same
// bits, output by output (the index of one that differs is reported).
template <class Run>
void check_same_bits_at_1_and_2_threads(Run run) {
  const auto one = run(1);
  const auto two = run(2);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(one[i], two[i]));
  }
}

// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = threads();
  ~ThreadsGuard() { set_threads(saved); }
};

// The message of the std::exception `fn` throws, or "" when it returns normally.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace dg::test
