// bench_gemm_small: GFLOP/s of the three one-thread GEMMs that can run attention's per-head
// products in bf16 precision, at attention's shapes: cblas_sgemm (float32), gemm_bf16_small
// (AVX512_BF16 dot products, tensor/gemm_bf16_small.h) and gemm_bf16_one_thread (oneDNN). A
// 64-row block against `cols` keys with head size hd, in the three transpose cases attention uses:
//   S = Q·Kᵀ      (N, T): M = 64, N = cols, K = hd   (also dP = dO·Vᵀ)
//   O = P·V       (N, N): M = 64, N = hd,   K = cols (also dQ = dS·K)
//   dV = Pᵀ·dO    (T, N): M = cols, N = hd, K = 64   (also dK = dSᵀ·Q)
// and Q·K (N, N), the Q·Kᵀ shape with the keys stored [hd, cols]: not an attention case, it shows
// what gemm_bf16_small's transposing pack of B costs.
// Each sample times enough calls for about 20 µs; the three kernels are interleaved sample by
// sample (load from other processes hits all alike) until each has run --seconds (default 0.02)
// and at least 5 samples; the table shows medians. The last column is what gemm_one_thread picks
// (gemm_bf16_small_suits). One thread; it does not time bf16 at other thread counts or float64.
//   bench_gemm_small [--seconds S]
#include <cblas.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Case {
  const char* name;
  bool ta, tb;
  int64_t M, N, K;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// GFLOP/s of sgemm, gemm_bf16_small and oneDNN's one-thread bf16 GEMM on one case.
std::vector<double> measure(const Case& c, double min_seconds) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
  std::vector<float> A(size_t(c.M * c.K)), B(size_t(c.K * c.N)), C(size_t(c.M * c.N));
  for (float& x : A) x = dist(rng);
  for (float& x : B) x = dist(rng);
  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans, c.tb ? CblasTrans : CblasNoTrans,
                int(c.M), int(c.N), int(c.K), 1.0f, A.data(), int(lda), B.data(), int(ldb), 0.0f,
                C.data(), int(c.N));
  };
  auto small = [&] {
    gemm_bf16_small(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(),
                    c.N);
  };
  auto onednn = [&] {
    gemm_bf16_one_thread(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
                         C.data(), c.N);
  };
  const double flop = 2.0 * double(c.M) * double(c.N) * double(c.K);
  const int calls = int(std::clamp(20e-6 * 50e9 / flop, 1.0, 1000.0));  // ~20 µs at 50 GF/s
  std::vector<std::vector<double>> times(3);
  std::vector<double> totals(3, 0.0);
  auto sample = [&](int k, auto&& run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) run();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
    times[size_t(k)].push_back(s);
    totals[size_t(k)] += s * calls;
  };
  sgemm(), small(), onednn();  // warm-up: buffers grown, oneDNN primitive created
  while (times[0].size() < 5 || *std::min_element(totals.begin(), totals.end()) < min_seconds) {
    sample(0, sgemm);
    sample(1, small);
    sample(2, onednn);
  }
  std::vector<double> gflops;
  for (const auto& t : times) gflops.push_back(flop / median(t) * 1e-9);
  return gflops;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    double min_seconds = 0.02;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc)
        min_seconds = std::stod(argv[++i]);
      else
        throw std::invalid_argument(
            fmt::format("bench_gemm_small: unknown argument '{}' (use --seconds S)", argv[i]));
    }
    if (!gemm_bf16_small_available())
      throw std::runtime_error("bench_gemm_small: this CPU has no AVX512_BF16 (" +
                               cpu_features().summary() + ")");
    set_threads(1);
    select_gemm_kernels();
    fmt::print("one thread; CPU: {}; float32: OpenBLAS {}; bf16 small: {}; oneDNN: {}\n",
               cpu_features().model, select_gemm_kernels().blas_core, gemm_bf16_small_name(),
               bf16_kernel_name());
    fmt::print("GFLOP/s from the median sample; pick = what gemm_one_thread runs in bf16\n");
    fmt::print("{:>8} {:>5} {:>4} {:>16} {:>8} {:>8} {:>8} {:>7}\n", "case", "cols", "hd",
               "M x N x K", "sgemm", "small", "oneDNN", "pick");
    for (int64_t hd : {16, 32, 64, 128})
      for (int64_t cols : {64, 128, 256, 512, 1024}) {
        const Case cases[] = {{"Q·Kᵀ", false, true, 64, cols, hd},
                              {"Q·K", false, false, 64, cols, hd},
                              {"P·V", false, false, 64, hd, cols},
                              {"Pᵀ·dO", true, false, cols, hd, 64}};
        for (const Case& c : cases) {
          const std::vector<double> g = measure(c, min_seconds);
          const bool small = gemm_bf16_small_suits(c.M, c.N, c.K, true);
          const char* pick = c.M * c.N * c.K >= kBf16OneThreadMinWork ? "oneDNN"
                             : small                                  ? "small"
                                                                      : "sgemm";
          fmt::print("{:>8} {:>5} {:>4} {:>16} {:>8.1f} {:>8.1f} {:>8.1f} {:>7}\n", c.name, cols,
                     hd, fmt::format("{}x{}x{}", c.M, c.N, c.K), g[0], g[1], g[2], pick);
        }
      }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
