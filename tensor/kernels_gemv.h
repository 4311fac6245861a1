// Matrix-vector product for decoding one token: y [rows] = W [rows, cols] · x [cols] (+ y), the
// M = 1 case of gemm(false, true, 1, rows, cols, ...) that a K/V-cached decoder runs once per
// weight matrix per token. OpenBLAS's sgemm packs (copies) the whole weight for M = 1, so a
// decoder through it reads each weight twice and writes it once; this reads it once, as a
// stream. Not here: several input rows (gemm), transposed weights, autograd.
#pragma once
#include <cmath>
#include <cstdint>

namespace dg {

// The fast kernels' one summation order, whatever the instruction set: element i of a row goes
// into lane i mod 32 of 32 float accumulators by fused multiply-add (FMA), chunk after chunk in
// order; then the lanes are summed as a tree, lane l with l + 16, then + 8, + 4, + 2, + 1; then
// y[r] += that sum when accumulate. So the AVX-512 path, the AVX2 path and the portable path give
// the same bits (tests/test_kernels_gemv.cpp checks it), and since every output row is computed
// by one thread, so do all thread counts. The rounding differs from sgemm's (another order).
enum class GemvPath { portable, avx2, avx512 };
constexpr int64_t kGemvLanes = 32;

// The order's two pieces, written out: the portable path is these, and the kernels of other
// storage (kernels_quantized.cpp's int8 and bf16 rows) follow them too.
// gemv_lane_tree sums 32 lanes as a tree: lane l += lane l + width for width 16, 8, 4, 2, 1.
template <class T>
T gemv_lane_tree(T* lanes) {
  for (int64_t width = kGemvLanes / 2; width >= 1; width /= 2)
    for (int64_t l = 0; l < width; ++l) lanes[l] = lanes[l] + lanes[l + width];
  return lanes[0];
}

// One row · x [cols]: element i (weight_at(i), widened to T) into lane i mod 32 by FMA, then the
// tree.
template <class T, class WeightAt>
T gemv_portable_row(WeightAt weight_at, const T* x, int64_t cols) {
  T lanes[kGemvLanes] = {};
  int64_t i = 0;
  for (; i + kGemvLanes <= cols; i += kGemvLanes)
    for (int64_t l = 0; l < kGemvLanes; ++l)
      lanes[l] = std::fma(weight_at(i + l), x[i + l], lanes[l]);
  for (int64_t l = 0; i + l < cols; ++l) lanes[l] = std::fma(weight_at(i + l), x[i + l], lanes[l]);
  return gemv_lane_tree(lanes);
}

// The best path this CPU runs (AVX-512F, else AVX2 with FMA, else portable: cpu_features.h).
GemvPath gemv_best_path();
const char* gemv_path_name(GemvPath path);  // "portable", "avx2", "avx512"

// y [rows] = W [rows, cols] (row stride ldw ≥ cols) · x [cols], added to y when accumulate (y is
// not read otherwise). y must not overlap W or x. Rows are spread over the OpenMP threads above a
// size. float: the path `path` (default: the best one; asking for one the CPU lacks runs the
// portable one); double: the portable order in double.
void gemv(const float* W, int64_t rows, int64_t cols, int64_t ldw, const float* x, float* y,
          bool accumulate, GemvPath path = gemv_best_path());
void gemv(const double* W, int64_t rows, int64_t cols, int64_t ldw, const double* x, double* y,
          bool accumulate);

// The plain reference: one dot product per row, accumulated in double, then added to y (when
// accumulate) and rounded to T.
template <class T>
void ref_gemv(const T* W, int64_t rows, int64_t cols, int64_t ldw, const T* x, T* y,
              bool accumulate);

}  // namespace dg
