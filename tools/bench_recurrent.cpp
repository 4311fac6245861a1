// bench_recurrent: milliseconds per LSTM (or GRU) training step (forward of dg::LSTM, a
// random-weighted loss over the outputs, backward, gradients zeroed), float32 weights, at 1 and 2
// threads, with each gate-math path: the whole-sequence op (fused), the fused cell ops step by
// step (per_step, the path before the sequence op) and their plain twins (composed). Default
// shape: seq 64, batch 32, input 128, hidden 256, 2 layers (tools/torch_bench_lstm.py times
// torch.nn.LSTM at the same shape and flags). Each setting runs until --seconds (default 2) and at
// least 3 times; the best and the median wall time are printed (the best is the figure to compare
// on a shared machine), and the mean CPU time of the process per step (at one thread, the steadier
// figure on a busy machine).
//   bench_recurrent [--seconds S] [--seq T] [--batch N] [--input I] [--hidden H] [--layers L]
//                   [--threads 1|2|0 (both)] [--bidirectional 0|1] [--gru 0|1]
//                   [--precision float32|bf16] [--paths fused|all]
// It does not time float64 or RNN, or the first call's allocations, and it does not pin threads.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/recurrent.h"
#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Timing {
  double best_ms, median_ms, cpu_ms;  // cpu: the process's CPU time per step (all threads), mean
};

// On a shared machine the wall time of a one-thread run waits for the core; its CPU time does
// not, so cpu_ms is the steadier figure to compare one-thread runs by.
template <class F>
Timing time_runs(F&& f, double min_seconds) {
  f();  // warm-up
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  while (t.size() < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             min_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  std::sort(t.begin(), t.end());
  return {t.front() * 1e3, t[t.size() / 2] * 1e3, cpu / static_cast<double>(t.size()) * 1e3};
}
}  // namespace

int main(int argc, char** argv) {
  double min_seconds = 2.0;
  int64_t T = 64, N = 32, I = 128, H = 256, L = 2, thread_count = 0;
  bool bidirectional = false, gru = false, all_paths = true;
  MatmulPrecision precision = MatmulPrecision::float32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--precision") {
      if (value != "float32" && value != "bf16") {
        fmt::print(stderr, "bench_recurrent: --precision is float32 or bf16, got {}\n", value);
        return 2;
      }
      precision = value == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::float32;
      continue;
    }
    if (flag == "--paths") {
      all_paths = value == "all";
      continue;
    }
    const double v = std::stod(value);
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
    else if (flag == "--threads")
      thread_count = static_cast<int64_t>(v);
    else if (flag == "--bidirectional")
      bidirectional = v != 0;
    else if (flag == "--gru")
      gru = v != 0;
    else {
      fmt::print(stderr, "bench_recurrent: unknown flag {}\n", flag);
      return 2;
    }
  }
  set_matmul_precision(precision);
  manual_seed(0);
  const RecurrentOptions options{
      .input_size = I, .hidden_size = H, .num_layers = L, .bidirectional = bidirectional};
  Recurrent rnn(gru ? RecurrentKind::gru : RecurrentKind::lstm, options);
  rnn.flat_parameters();
  const int64_t D = bidirectional ? 2 : 1;
  const Tensor x = random_tensor({T, N, I}, 1, -1, 1, false).to(DType::f32);
  const Tensor w = random_tensor({T, N, D * H}, 2, -1, 1, false).to(DType::f32);
  fmt::print("{}{} training step, seq {} batch {} input {} hidden {} layers {}, {} matmuls\n",
             bidirectional ? "bidirectional " : "", gru ? "GRU" : "LSTM", T, N, I, H, L,
             precision == MatmulPrecision::bf16 ? "bf16" : "float32");
  std::vector<int> thread_list = {1, 2};
  if (thread_count > 0) thread_list = {static_cast<int>(thread_count)};
  std::vector<GateMath> paths = {GateMath::fused};
  if (all_paths) paths = {GateMath::fused, GateMath::per_step, GateMath::composed};
  for (int threads : thread_list) {
    set_threads(threads);
    for (GateMath math : paths) {
      rnn.gate_math = math;
      const Timing t = time_runs(
          [&] {
            rnn.zero_grad();
            backward(sum(mul(rnn.forward(x).output, w)));
          },
          min_seconds);
      const char* path = math == GateMath::fused      ? "fused"
                         : math == GateMath::per_step ? "per_step"
                                                      : "composed";
      fmt::print(
          "  threads {} {:8}: best {:.1f} ms/step, median {:.1f} ms/step, cpu {:.1f} ms/step\n",
          threads, path, t.best_ms, t.median_ms, t.cpu_ms);
    }
  }
  return 0;
}
