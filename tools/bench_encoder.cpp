// bench_encoder: one training step (forward + backward, float32, dropout 0, no mask) of a
// TransformerEncoderLayer at batch 32, seq 128, d_model 256, nhead 8, dim_feedforward 1024,
// batch_first, post-norm, at 1 and 2 threads; prints the best and median ms/step over --seconds
// (default 3, at least 5 steps), the mean CPU time of the process per step and the least CPU time
// of one step (at one thread the steadier figures on a busy machine: another process's turn on the
// core is not counted), the step's GEMM FLOPs (19.33 G) and its rate at the best step, and with
// --profile the share of each op family (tensor/profile.h). tools/torch_bench_encoder.py times
// torch's nn.TransformerEncoderLayer at the same settings. It does not time the optimizer, float64
// or masks, and it does not pin threads.
//   bench_encoder [--seconds S] [--profile] [--threads 1|2|0 (both, the default)]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "nn/transformer.h"
#include "tensor/profile.h"
#include "tensor/rng.h"
#include "tensor/threads.h"

using namespace dg;

// The step's GEMM FLOPs (2·M·N·K each; x takes no gradient): forward, the in-projection
// 4096×768×256, Q·Kᵀ and P·V 256 × 128×128×32 each, out_proj 4096×256×256, linear1 4096×1024×256,
// linear2 4096×256×1024 (6.98 GFLOP); backward, dX and dW of out_proj, linear1 and linear2, dW of
// the in-projection, and attention's dV, dP, dQ, dK (12.35 GFLOP). 19.33 GFLOP in all.
double encoder_step_gflop(int64_t N, int64_t T, int64_t D, int64_t heads, int64_t ff) {
  const double rows = static_cast<double>(N * T), hd = static_cast<double>(D / heads);
  const double projections = 2 * rows * D * (3 * D + D + 2 * ff);  // forward GEMMs of the linears
  const double attention = 2 * 2 * static_cast<double>(N * heads) * T * T * hd;  // Q·Kᵀ, P·V
  // backward: dX and dW for every linear but the in-projection (dW only), 4 attention products
  const double backward = 2 * projections - 2 * rows * D * 3 * D + 2 * attention;
  return (projections + attention + backward) / 1e9;
}

int main(int argc, char** argv) {
  double min_seconds = 3.0;
  bool profile = false;
  int only_threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      min_seconds = std::stod(argv[++i]);
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      only_threads = std::stoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--profile")) {
      profile = true;
    } else {
      fmt::print(stderr, "usage: bench_encoder [--seconds S] [--profile] [--threads 1|2|0]\n");
      return 2;
    }
  }
  const int64_t N = 32, T = 128, D = 256;
  manual_seed(0);
  TransformerEncoderLayer layer(
      {.d_model = D, .nhead = 8, .dim_feedforward = 1024, .dropout = 0.0, .batch_first = true});
  layer.flat_parameters();
  const Tensor x = random_tensor({N, T, D}, 1, -1, 1, false).to(DType::f32);
  const Tensor w = random_tensor({N, T, D}, 2, -1, 1, false).to(DType::f32);
  auto step = [&] {
    layer.zero_grad();
    backward(sum(mul(layer.forward(x), w)));
  };
  for (int threads : {1, 2}) {
    if (only_threads != 0 && threads != only_threads) continue;
    set_threads(threads);
    step();  // warm-up: buffers
    std::vector<double> t, cpu;
    if (profile) set_op_profiling(true);
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    while (t.size() < 5 ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
               min_seconds) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      step();
      cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC * 1e3);
      t.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double cpu_ms = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC * 1e3 /
                          static_cast<double>(t.size());
    std::sort(t.begin(), t.end());
    const double gflop = encoder_step_gflop(N, T, D, 8, 1024);
    fmt::print(
        "threads {}: TransformerEncoderLayer N={} T={} d={} heads=8 ff=1024 fwd+bwd: best "
        "{:.1f} ms/step, median {:.1f} ({} steps), cpu {:.1f} ms/step (least {:.1f}); {:.2f} "
        "GFLOP/step, {:.1f} GFLOP/s at the best\n",
        threads, N, T, D, t.front(), t[t.size() / 2], t.size(), cpu_ms,
        *std::min_element(cpu.begin(), cpu.end()), gflop, gflop / t.front() * 1e3);
    if (profile) {
      const OpProfile p = op_profile();
      for (int f = 0; f < kOpFamilies; ++f)
        fmt::print("  {:<10} {:5.1f}%  ({} calls)\n", op_family_name(static_cast<OpFamily>(f)),
                   100.0 * p.seconds[f] / std::max(p.total(), 1e-12), p.calls[f]);
      set_op_profiling(false);
    }
  }
}
