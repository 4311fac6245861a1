// gemv against ref_gemv (odd sizes around the 32-lane chunks, padded row strides, accumulate or
// not, float and double); every float path the CPU has gives the portable path's bits; the same
// bits at 1 and 2 threads; y is not read without accumulate; bad sizes throw naming gemv.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/kernels_gemv.h"
#include "tensor/threads.h"
#include "tests/kernel_test_helpers.h"

using namespace dg;

namespace {

struct Case {
  int64_t rows, cols, ldw;
};
// Row counts around the 4-row blocks, column counts around the 32-lane chunks and the 16-lane
// halves, strides with padding, and the decoder's shapes.
const Case kCases[] = {{1, 1, 1},       {3, 5, 7},        {4, 16, 16},    {5, 17, 20}, {7, 31, 31},
                       {8, 32, 32},     {9, 33, 40},      {13, 47, 47},   {2, 48, 50}, {6, 63, 64},
                       {17, 64, 64},    {33, 100, 101},   {64, 256, 256}, {3, 0, 1},   {0, 8, 8},
                       {130, 768, 768}, {250, 2048, 2050}};
}  // namespace

TEST_CASE_TEMPLATE("gemv matches ref_gemv within float rounding of the dot products", T, float,
                   double) {
  for (const Case& c : kCases)
    for (bool accumulate : {false, true}) {
      CAPTURE(c.rows);
      CAPTURE(c.cols);
      CAPTURE(c.ldw);
      CAPTURE(accumulate);
      const std::vector<T> W = random_values<T>(size_t(c.rows * c.ldw + 1), 1),
                           x = random_values<T>(size_t(c.cols + 1), 2),
                           y0 = random_values<T>(size_t(c.rows + 1), 3);
      std::vector<T> fast = y0, ref = y0;
      if (!accumulate)  // y is not read: NaN there must not show
        for (int64_t r = 0; r < c.rows; ++r) fast[r] = std::numeric_limits<T>::quiet_NaN();
      gemv(W.data(), c.rows, c.cols, c.ldw, x.data(), fast.data(), accumulate);
      ref_gemv(W.data(), c.rows, c.cols, c.ldw, x.data(), ref.data(), accumulate);
      // The forward error bound of a sum of n = cols + 1 terms in any order (FMA or not):
      // n · eps · Σ|terms|, eps the unit roundoff (2⁻²⁴ float, 2⁻⁵³ double); plus one rounding of
      // the reference to T.
      const double eps = std::is_same_v<T, float> ? 0x1p-24 : 0x1p-53;
      for (int64_t r = 0; r < c.rows; ++r) {
        CAPTURE(r);
        double magnitude = accumulate ? std::fabs(double(y0[r])) : 0.0;
        for (int64_t i = 0; i < c.cols; ++i)
          magnitude += std::fabs(double(W[r * c.ldw + i]) * double(x[i]));
        CHECK(std::fabs(double(fast[r]) - double(ref[r])) <= double(c.cols + 2) * eps * magnitude);
      }
      CHECK(std::memcmp(&fast[c.rows], &y0[c.rows], sizeof(T)) == 0);  // past the end: untouched
    }
}

TEST_CASE("gemv: every float path this CPU has gives the portable path's bits") {
  INFO("best path here: " << gemv_path_name(gemv_best_path()));
  for (const Case& c : kCases) {
    CAPTURE(c.rows);
    CAPTURE(c.cols);
    const std::vector<float> W = random_values<float>(size_t(c.rows * c.ldw + 1), 4),
                             x = random_values<float>(size_t(c.cols + 1), 5);
    std::vector<float> portable(size_t(c.rows) + 1, 0.5f);
    gemv(W.data(), c.rows, c.cols, c.ldw, x.data(), portable.data(), true, GemvPath::portable);
    for (GemvPath path : {GemvPath::avx2, GemvPath::avx512}) {
      CAPTURE(gemv_path_name(path));
      std::vector<float> fast(size_t(c.rows) + 1, 0.5f);
      gemv(W.data(), c.rows, c.cols, c.ldw, x.data(), fast.data(), true, path);
      CHECK(std::memcmp(fast.data(), portable.data(), sizeof(float) * fast.size()) == 0);
    }
  }
}

TEST_CASE("gemv gives the same bits at 1 and 2 threads") {
  const int64_t rows = 1000, cols = 777;  // above the size that spreads rows over threads
  const std::vector<float> W = random_values<float>(size_t(rows * cols), 6),
                           x = random_values<float>(size_t(cols), 7);
  const int previous = threads();
  std::vector<float> one(rows), two(rows);
  set_threads(1);
  gemv(W.data(), rows, cols, cols, x.data(), one.data(), false);
  set_threads(2);
  gemv(W.data(), rows, cols, cols, x.data(), two.data(), false);
  set_threads(previous);
  CHECK(std::memcmp(one.data(), two.data(), sizeof(float) * rows) == 0);
}

TEST_CASE("gemv rejects negative sizes and a row stride below cols, naming gemv") {
  std::vector<float> w(16), x(4), y(4);
  CHECK_THROWS_WITH(gemv(w.data(), 4, 4, 3, x.data(), y.data(), false),
                    doctest::Contains("gemv: rows 4 and cols 4"));
  CHECK_THROWS_WITH(gemv(w.data(), -1, 4, 4, x.data(), y.data(), false), doctest::Contains("gemv"));
}
