// bench_conv: GFLOP/s of depthgrad's conv2d, forward + backward (float32), for a few typical
// shapes (a small CNN's layers at batch 64), at 1 and 2 threads, beside the sgemm rate measured in
// the same run (a 1024³ float32 matmul through the library's GEMM entry point) as the peak to
// compare with. Each shape runs until --seconds (default 1) and at least 3 times; the table shows
// the median. FLOPs counted: 2·N·O·Ho·Wo·(C/groups)·kH·kW per GEMM pass (forward, weight gradient,
// and input gradient when the input requires grad).
//   bench_conv [--seconds S]
// It does not time float64, pooling or the first call's allocations, and it does not pin threads.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Shape4 {
  int64_t N, C, H, W, O, k, pad;
  bool input_grad;  // the first layer's input (the images) needs no gradient
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double median_seconds(F&& f, double min_seconds) {
  f();  // warm-up: buffers, column scratch
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (t.size() < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

double sgemm_gflops(double min_seconds) {
  const int64_t n = 1024;
  Tensor a = random_tensor({n, n}, 1, -1, 1, false).to(DType::f32);
  Tensor b = random_tensor({n, n}, 2, -1, 1, false).to(DType::f32);
  NoGradGuard no_grad;
  const double s = median_seconds([&] { (void)matmul(a, b); }, min_seconds);
  return 2.0 * n * n * n / s * 1e-9;
}

double conv_gflops(const Shape4& s, double min_seconds) {
  Tensor x = random_tensor({s.N, s.C, s.H, s.W}, 3, -1, 1, false).to(DType::f32);
  Tensor w = random_tensor({s.O, s.C, s.k, s.k}, 4, -1, 1, false).to(DType::f32);
  Tensor b = random_tensor({s.O}, 5, -1, 1, false).to(DType::f32);
  x.set_requires_grad(s.input_grad);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  const double sec = median_seconds(
      [&] {
        Tensor y = conv2d(x, w, b, {1, 1}, {s.pad, s.pad});
        backward(y, Tensor::ones(y.shape(), DType::f32));
        w.zero_grad();
        b.zero_grad();
        if (s.input_grad) x.zero_grad();
      },
      min_seconds);
  const int64_t Ho = s.H + 2 * s.pad - s.k + 1, Wo = s.W + 2 * s.pad - s.k + 1;
  const double pass = 2.0 * s.N * s.O * Ho * Wo * s.C * s.k * s.k;
  return pass * (s.input_grad ? 3 : 2) / sec * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  double min_seconds = 1.0;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) min_seconds = std::stod(argv[++i]);
  const std::vector<Shape4> shapes = {
      {64, 1, 28, 28, 32, 3, 1, false},  // first layer of a small CNN on 28×28 images
      {64, 32, 28, 28, 64, 3, 1, true},
      {64, 64, 14, 14, 64, 3, 1, true},
  };
  for (int threads : {1, 2}) {
    set_threads(threads);
    const double peak = sgemm_gflops(min_seconds);
    fmt::print("threads {}: sgemm 1024^3 {:.1f} GFLOP/s\n", threads, peak);
    for (const Shape4& s : shapes) {
      const double g = conv_gflops(s, min_seconds);
      fmt::print(
          "  conv2d fwd+bwd N={} {}->{} {}x{} k{} pad{}: {:.1f} GFLOP/s ({:.0f}% of sgemm)\n", s.N,
          s.C, s.O, s.H, s.W, s.k, s.pad, g, 100.0 * g / peak);
    }
  }
  return 0;
}
