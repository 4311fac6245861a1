// bench_conv: GFLOP/s of depthgrad's conv2d, forward + backward (float32), for a few typical
// shapes (a small CNN's layers at batch 64), at 1 and 2 threads, beside the sgemm rate measured in
// the same run (a 1024³ float32 matmul through the library's GEMM entry point) as the peak to
// compare with. Each shape runs until --seconds (default 1) and at least 3 times; the table shows
// the median. FLOPs counted: 2·N·O·Ho·Wo·(C/groups)·kH·kW per GEMM pass (forward, weight gradient,
// and input gradient when the input requires grad).
//   bench_conv [--seconds S] [--passes] [--precision float32|bf16]
// --passes adds a ResNet-18's layers (32×32 inputs, batch 32) and, for every shape, each pass's
// GFLOP/s on the im2col kernel and on oneDNN's (the kernels called directly): the figures that
// set tensor/kernels_conv_onednn.h's rules.
// It does not time float64, pooling or the first call's allocations, and it does not pin threads.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_conv.h"
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

// GFLOP/s of each pass (forward, input gradient, weight gradient) of s on the given kernel, by
// the kernels themselves (no autograd): the measurements behind conv_onednn_runs's rules.
struct PassRates {
  double forward, input, weight;
};
PassRates pass_gflops(const Shape4& s, ConvKernel kernel, double min_seconds) {
  set_conv_kernel(kernel);
  const int64_t Ho = s.H + 2 * s.pad - s.k + 1, Wo = s.W + 2 * s.pad - s.k + 1;
  ConvGeom g{s.N, s.C, s.H, s.W, s.O, s.k, s.k};
  g.pH = g.pW = s.pad;
  g.Ho = Ho;
  g.Wo = Wo;
  std::vector<float> x(s.N * s.C * s.H * s.W, 0.5f), w(s.O * s.C * s.k * s.k, 0.25f),
      y(s.N * s.O * Ho * Wo, 0.125f), dx(x.size()), dw(w.size());
  const double pass = 2.0 * s.N * s.O * Ho * Wo * s.C * s.k * s.k;
  PassRates r{};
  r.forward =
      pass /
      median_seconds([&] { conv2d_forward<float>(y.data(), x.data(), w.data(), nullptr, g); },
                     min_seconds) *
      1e-9;
  r.input = pass /
            median_seconds([&] { conv2d_backward_input<float>(dx.data(), y.data(), w.data(), g); },
                           min_seconds) *
            1e-9;
  r.weight = pass /
             median_seconds(
                 [&] { conv2d_backward_weight<float>(dw.data(), nullptr, x.data(), y.data(), g); },
                 min_seconds) *
             1e-9;
  set_conv_kernel(ConvKernel::automatic);
  return r;
}

std::string shape_name(const Shape4& s) {
  return fmt::format("N={} {}->{} {}x{} k{} pad{}", s.N, s.C, s.O, s.H, s.W, s.k, s.pad);
}
}  // namespace

int main(int argc, char** argv) {
  double min_seconds = 1.0;
  bool passes = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc)
      min_seconds = std::stod(argv[++i]);
    else if (!std::strcmp(argv[i], "--passes"))
      passes = true;
    else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc)
      set_matmul_precision(!std::strcmp(argv[++i], "bf16") ? MatmulPrecision::bf16
                                                           : MatmulPrecision::float32);
    else {
      fmt::print(stderr, "bench_conv: unknown argument {}\n", argv[i]);
      return 2;
    }
  }
  std::vector<Shape4> shapes = {
      {64, 1, 28, 28, 32, 3, 1, false},  // first layer of a small CNN on 28×28 images
      {64, 32, 28, 28, 64, 3, 1, true},
      {64, 64, 14, 14, 64, 3, 1, true},
  };
  if (passes)  // a ResNet-18's layers on 32×32 images, batch 32
    for (const Shape4& s : std::vector<Shape4>{{32, 3, 32, 32, 64, 3, 1, false},
                                               {32, 64, 32, 32, 64, 3, 1, true},
                                               {32, 128, 16, 16, 128, 3, 1, true},
                                               {32, 256, 8, 8, 256, 3, 1, true},
                                               {32, 512, 4, 4, 512, 3, 1, true},
                                               {32, 64, 32, 32, 128, 1, 0, true}})
      shapes.push_back(s);
  for (int threads : {1, 2}) {
    set_threads(threads);
    const double peak = sgemm_gflops(min_seconds);
    fmt::print("threads {}: sgemm 1024^3 {:.1f} GFLOP/s\n", threads, peak);
    for (const Shape4& s : shapes) {
      const double g = conv_gflops(s, min_seconds);
      fmt::print("  conv2d fwd+bwd {}: {:.1f} GFLOP/s ({:.0f}% of sgemm)\n", shape_name(s), g,
                 100.0 * g / peak);
      if (!passes) continue;
      for (ConvKernel k : {ConvKernel::im2col, ConvKernel::onednn}) {
        const PassRates r = pass_gflops(s, k, min_seconds);
        fmt::print("    {:6}  forward {:6.1f}  input grad {:6.1f}  weight grad {:6.1f}\n",
                   k == ConvKernel::im2col ? "im2col" : "oneDNN", r.forward, r.input, r.weight);
      }
    }
  }
  return 0;
}
