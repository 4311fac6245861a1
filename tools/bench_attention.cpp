// bench_attention: wall time of the fused causal attention op (float32 forward, and forward +
// backward through the tape) at B=8 H=8 T=256 hd=32, at 1 and 2 threads, with float32 and (where
// the CPU has it) bf16 matmul precision; best of --repeat runs (default 7). It checks nothing
// (tests/test_kernels_attention.cpp and test_gemm_kernels.cpp do) and does not time float64, GQA
// or the attention_heads wrapper.
//   bench_attention [--repeat N]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"

using namespace dg;

int main(int argc, char** argv) {
  try {
    int repeat = 7;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
        repeat = std::max(1, std::stoi(argv[++i]));
      } else {
        throw std::invalid_argument(
            fmt::format("bench_attention: unknown argument '{}' (use --repeat N)", argv[i]));
      }
    }
    // q, k, v, dout: [B=8, H=8, T=256, hd=32] float32, values in [-1, 1)
    const Shape shape{8, 8, 256, 32};
    auto input = [&](uint64_t seed, bool grad) {
      Tensor t = random_tensor(shape, seed, -1, 1, false).to(DType::f32);
      if (grad) t.set_requires_grad(true);
      return t;
    };
    Tensor q = input(61, true), k = input(62, true), v = input(63, true), dout = input(64, false);
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    std::vector<MatmulPrecision> precisions{MatmulPrecision::float32};
    if (bf16_unsupported_reason().empty()) precisions.push_back(MatmulPrecision::bf16);
    for (MatmulPrecision precision : precisions)
      for (int n : {1, 2}) {
        MatmulPrecisionScope scope(precision);
        set_threads(n);
        double best_forward = 1e9, best_both = 1e9;
        for (int rep = 0; rep < repeat; ++rep) {
          for (const Tensor& t : {q, k, v}) t.impl()->grad = Tensor();
          const auto t0 = Clock::now();
          Tensor out = causal_attention(q, k, v);
          const auto t1 = Clock::now();
          backward(out, dout);
          const auto t2 = Clock::now();
          best_forward = std::min(best_forward, seconds(t0, t1));
          best_both = std::min(best_both, seconds(t0, t2));
        }
        fmt::print(
            "attention B=8 H=8 T=256 hd=32 float32 tensors, {} matmuls, {} thread(s): forward "
            "{:.2f} ms, forward+backward {:.2f} ms (best of {})\n",
            precision_name(precision), n, best_forward * 1e3, best_both * 1e3, repeat);
      }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
