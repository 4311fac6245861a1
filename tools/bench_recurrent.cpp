// bench_recurrent: milliseconds per LSTM training step (forward of dg::LSTM, a random-weighted
// loss over the outputs, backward, gradients zeroed), float32, at 1 and 2 threads, with the fused
// gate ops and with their plain twins. Default shape: seq 64, batch 32, input 128, hidden 256,
// 2 layers (tools/torch_bench_lstm.py times torch.nn.LSTM at the same shape). Each setting runs
// until --seconds (default 2) and at least 3 times; the best and the median are printed (the best
// is the figure to compare on a shared machine).
//   bench_recurrent [--seconds S] [--seq T] [--batch N] [--input I] [--hidden H] [--layers L]
// It does not time float64, GRU or RNN, or the first call's allocations, and it does not pin
// threads.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/recurrent.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Timing {
  double best_ms, median_ms;
};

template <class F>
Timing time_runs(F&& f, double min_seconds) {
  f();  // warm-up
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (t.size() < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front() * 1e3, t[t.size() / 2] * 1e3};
}
}  // namespace

int main(int argc, char** argv) {
  double min_seconds = 2.0;
  int64_t T = 64, N = 32, I = 128, H = 256, L = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double v = std::stod(argv[i + 1]);
    if (flag == "--seconds")
      min_seconds = v;
    else if (flag == "--seq")
      T = static_cast<int64_t>(v);
    else if (flag == "--batch")
      N = static_cast<int64_t>(v);
    else if (flag == "--input")
      I = static_cast<int64_t>(v);
    else if (flag == "--hidden")
      H = static_cast<int64_t>(v);
    else if (flag == "--layers")
      L = static_cast<int64_t>(v);
    else {
      fmt::print(stderr, "bench_recurrent: unknown flag {}\n", flag);
      return 2;
    }
  }
  manual_seed(0);
  LSTM lstm({.input_size = I, .hidden_size = H, .num_layers = L});
  lstm.flat_parameters();
  const Tensor x = random_tensor({T, N, I}, 1, -1, 1, false).to(DType::f32);
  const Tensor w = random_tensor({T, N, H}, 2, -1, 1, false).to(DType::f32);
  fmt::print("LSTM training step, seq {} batch {} input {} hidden {} layers {}, float32\n", T, N, I,
             H, L);
  for (int threads : {1, 2}) {
    set_threads(threads);
    for (GateMath math : {GateMath::fused, GateMath::composed}) {
      lstm.gate_math = math;
      const Timing t = time_runs(
          [&] {
            lstm.zero_grad();
            backward(sum(mul(lstm.forward(x).output, w)));
          },
          min_seconds);
      fmt::print("  threads {} {:8}: best {:.1f} ms/step, median {:.1f} ms/step\n", threads,
                 math == GateMath::fused ? "fused" : "composed", t.best_ms, t.median_ms);
    }
  }
  return 0;
}
