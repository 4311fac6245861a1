// bench_matmul: GFLOP/s of depthgrad's matmul op (float32 forward, no grad) against a direct
// cblas_sgemm call on the same shapes, at 1 and 2 threads. Each call is timed on its own; the two
// are interleaved call by call (so load from other processes hits both alike) until each has
// run for --seconds (default 0.2) and at least 5 times; the table shows medians and their ratio.
//   bench_matmul [--json] [--seconds S]
// It does not time backward passes or float64, and it does not pin threads.
#include <cblas.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/threads.h"

using namespace dg;

namespace {
struct Row {
  int64_t M, K, N;
  int threads;
  double dg_gflops = 0, blas_gflops = 0;            // from the median time
  double dg_best_gflops = 0, blas_best_gflops = 0;  // from the fastest run (less load-sensitive)
  int runs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a;
  f >> a;
  return a.empty() ? "?" : a;
}

// a [M, K] @ b [K, N], both float32 and contiguous.
Row measure(int64_t M, int64_t K, int64_t N, int threads, double min_seconds) {
  set_threads(threads);
  Tensor a = random_tensor({M, K}, 1, -1, 1, false).to(DType::f32);
  Tensor b = random_tensor({K, N}, 2, -1, 1, false).to(DType::f32);
  std::vector<float> c(M * N);
  NoGradGuard no_grad;
  auto run_dg = [&] { return matmul(a, b); };
  auto run_blas = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f,
                a.data<float>(), int(K), b.data<float>(), int(N), 0.0f, c.data(), int(N));
  };
  // warm-up (and a check that both computed the same product)
  Tensor y = run_dg();
  run_blas();
  double worst = 0;
  const float* py = y.data<float>();
  for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, double(std::fabs(py[i] - c[i])));
  if (worst > 1e-4 * double(K))
    throw std::runtime_error(
        fmt::format("bench_matmul: {}x{}x{}: matmul and sgemm differ by {}", M, K, N, worst));
  y = Tensor();

  std::vector<double> t_dg, t_blas;
  double total_dg = 0, total_blas = 0;
  while (t_dg.size() < 5 || total_dg < min_seconds || total_blas < min_seconds) {
    auto t0 = std::chrono::steady_clock::now();
    { Tensor out = run_dg(); }
    t_dg.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    run_blas();
    t_blas.push_back(seconds_since(t0));
    total_dg += t_dg.back();
    total_blas += t_blas.back();
  }
  const double flop = 2.0 * double(M) * double(N) * double(K);
  Row r{M, K, N, threads};
  r.dg_gflops = flop / median(t_dg) * 1e-9;
  r.blas_gflops = flop / median(t_blas) * 1e-9;
  r.dg_best_gflops = flop / *std::min_element(t_dg.begin(), t_dg.end()) * 1e-9;
  r.blas_best_gflops = flop / *std::min_element(t_blas.begin(), t_blas.end()) * 1e-9;
  r.runs = int(t_dg.size());
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    bool json = false;
    double min_seconds = 0.2;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--json")) {
        json = true;
      } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
        min_seconds = std::stod(argv[++i]);
      } else {
        throw std::invalid_argument(
            fmt::format("bench_matmul: unknown argument '{}' (use --json, --seconds S)", argv[i]));
      }
    }
    const int64_t shapes[][3] = {
        {256, 64, 64}, {256, 192, 64}, {1024, 1024, 1024}, {2048, 768, 768}};
    std::vector<Row> rows;
    for (auto& s : shapes)
      for (int threads : {1, 2}) rows.push_back(measure(s[0], s[1], s[2], threads, min_seconds));

    if (json) {
      fmt::print(
          "{{\"blas\": \"{}\", \"blas_threads\": \"{}\", \"load_average\": \"{}\", \"rows\": [\n",
          blas_config(), blas_parallel_mode(), load_average());
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        fmt::print(
            "  {{\"M\": {}, \"K\": {}, \"N\": {}, \"threads\": {}, \"depthgrad_gflops\": {:.2f}, "
            "\"sgemm_gflops\": {:.2f}, \"ratio\": {:.3f}, \"depthgrad_best_gflops\": {:.2f}, "
            "\"sgemm_best_gflops\": {:.2f}, \"runs\": {}}}{}\n",
            r.M, r.K, r.N, r.threads, r.dg_gflops, r.blas_gflops, r.dg_gflops / r.blas_gflops,
            r.dg_best_gflops, r.blas_best_gflops, r.runs, i + 1 < rows.size() ? "," : "");
      }
      fmt::print("]}}\n");
      return 0;
    }
    fmt::print(
        "matmul (float32 forward) vs direct cblas_sgemm; {}; BLAS threads: {}; load average {}\n",
        blas_config(), blas_parallel_mode(), load_average());
    fmt::print(
        "GF/s from the median run (best run in brackets); ratio = depthgrad / sgemm medians\n");
    fmt::print("{:>16} {:>7} {:>18} {:>18} {:>7} {:>6}\n", "M x K x N", "threads", "depthgrad GF/s",
               "sgemm GF/s", "ratio", "runs");
    for (const Row& r : rows)
      fmt::print("{:>16} {:>7} {:>18} {:>18} {:>7.3f} {:>6}\n",
                 fmt::format("{}x{}x{}", r.M, r.K, r.N), r.threads,
                 fmt::format("{:.1f} [{:.1f}]", r.dg_gflops, r.dg_best_gflops),
                 fmt::format("{:.1f} [{:.1f}]", r.blas_gflops, r.blas_best_gflops),
                 r.dg_gflops / r.blas_gflops, r.runs);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
}
