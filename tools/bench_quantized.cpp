// bench_quantized: the quantized weight's products (tensor/quantized_matrix.h) against float32 on
// the same shapes: the forward Y = X·Wᵀ and the input gradient dX = dY·W at training's M = 512
// rows (float32: dg::gemm, as linear runs it; quantized: the panel GEMMs that dequantise rows of
// Ŵ as they go), and one decoding row, M = 1 (float32: dg::gemv; quantized: quantized_gemv, which
// reads the int8 / bf16 rows directly). Prints milliseconds per call (medians) and each format's
// time as a ratio of float32's (below 1: faster). Samples alternate between the kernels, so load
// from other processes hits all alike. Float32 matmul precision; the threads of --threads.
//   bench_quantized [--threads N] [--seconds S]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/kernels_gemv.h"
#include "tensor/kernels_matmul.h"
#include "tensor/quantized_matrix.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Case {
  const char* name;
  int64_t M, N, K;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Median milliseconds of each function, sampled in turn until each ran `seconds` (≥ 5 samples).
std::vector<double> time_all(const std::vector<std::function<void()>>& fns, double seconds) {
  using clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> samples(fns.size());
  std::vector<double> spent(fns.size(), 0.0);
  for (const auto& f : fns) f();  // warm up (buffers, caches)
  for (int round = 0;; ++round) {
    bool done = round >= 5;
    for (size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = clock::now();
      fns[i]();
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      samples[i].push_back(1e3 * s);
      spent[i] += s;
      done = done && spent[i] >= seconds;
    }
    if (done) break;
  }
  std::vector<double> out;
  for (const auto& s : samples) out.push_back(median(s));
  return out;
}

// One row of the table: float32, int8 and bf16 milliseconds of the forward (and dX when M > 1).
void run_case(const Case& c, double seconds) {
  const std::vector<float> W = random_floats(c.N * c.K, 1), X = random_floats(c.M * c.K, 2),
                           dY = random_floats(c.M * c.N, 3);
  const Tensor w = Tensor::from_data(W.data(), {c.N, c.K});
  const QuantizedMatrix q8 = quantize_matrix(w, QuantFormat::int8),
                        q16 = quantize_matrix(w, QuantFormat::bf16);
  std::vector<float> Y(static_cast<size_t>(c.M * c.N)), dX(static_cast<size_t>(c.M * c.K));
  auto forward_f32 = [&] {
    if (c.M == 1)
      gemv(W.data(), c.N, c.K, c.K, X.data(), Y.data(), false);
    else
      gemm(false, true, c.M, c.N, c.K, 1.0f, X.data(), c.K, W.data(), c.K, 0.0f, Y.data(), c.N);
  };
  auto forward_q = [&](const QuantizedMatrix& q) {
    return [&] { quantized_matmul<float>(X.data(), c.M, c.K, q, Y.data(), c.N, false); };
  };
  const std::vector<double> f = time_all({forward_f32, forward_q(q8), forward_q(q16)}, seconds);
  fmt::print(
      "{:<28} {:>5} {:>6} {:>6} | fwd  f32 {:8.3f} ms  int8 {:8.3f} ({:.2f}x)  bf16 {:8.3f} "
      "({:.2f}x)\n",
      c.name, c.M, c.N, c.K, f[0], f[1], f[1] / f[0], f[2], f[2] / f[0]);
  if (c.M == 1) return;
  auto backward_f32 = [&] {
    gemm(false, false, c.M, c.K, c.N, 1.0f, dY.data(), c.N, W.data(), c.K, 0.0f, dX.data(), c.K);
  };
  auto backward_q = [&](const QuantizedMatrix& q) {
    return [&] {
      quantized_matmul_backward_input<float>(dY.data(), c.M, c.N, q, dX.data(), c.K, false);
    };
  };
  const std::vector<double> b = time_all({backward_f32, backward_q(q8), backward_q(q16)}, seconds);
  fmt::print(
      "{:<28} {:>5} {:>6} {:>6} | dX   f32 {:8.3f} ms  int8 {:8.3f} ({:.2f}x)  bf16 {:8.3f} "
      "({:.2f}x)\n",
      "", "", "", "", b[0], b[1], b[1] / b[0], b[2], b[2] / b[0]);
}
}  // namespace

int main(int argc, char** argv) {
  int threads_wanted = 0;
  double seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads_wanted = std::stoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::stod(argv[++i]);
    else {
      fmt::print(stderr, "usage: bench_quantized [--threads N] [--seconds S]\n");
      return 2;
    }
  }
  if (threads_wanted > 0) set_threads(threads_wanted);
  fmt::print("bench_quantized: {} threads, GEMV path {}, {}\n", threads(),
             gemv_path_name(gemv_best_path()), cpu_features().summary());
  const Case cases[] = {
      {"train: attention 768", 512, 768, 768},
      {"train: FFN up 768 -> 3072", 512, 3072, 768},
      {"train: FFN down 3072 -> 768", 512, 768, 3072},
      {"train: head 768 -> 8192", 512, 8192, 768},
      {"decode: attention 768", 1, 768, 768},
      {"decode: FFN up 768 -> 3072", 1, 3072, 768},
      {"decode: FFN down 3072 -> 768", 1, 768, 3072},
      {"decode: head 768 -> 32000", 1, 32000, 768},
  };
  fmt::print("{:<28} {:>5} {:>6} {:>6}\n", "shape", "M", "N", "K");
  for (const Case& c : cases) run_case(c, seconds);
  return 0;
}
