// The training-speed benchmark behind `depthgrad bench`, as a library so tests can drive it.
// For one named config (a preset: micro, mini, small, base) and one thread count it runs full
// Trainer steps (sample, zero grad, forward, loss, backward, clip, AdamW) on random tokens (seed
// 0) in one matmul precision, and reports the median step time, tokens/s, achieved GFLOP/s against
// the measured peak of the best GEMM kernel of that precision (on a large square and on the
// model's largest GEMM), peak resident memory and the time per op family (tensor/profile.h).
// It also writes the files of the PyTorch equivalence check (tools/torch_reference.py --check).
// It does not start processes or talk to PyTorch: tools/cli/cmd_bench.cpp does, so that every
// peak-memory figure comes from a fresh process.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "tensor/profile.h"
#include "train/data_parallel.h"
#include "train/io/json.h"
#include "train/lm/run_config.h"

namespace dg {

// A measurement: the run's model, batch and training settings (train/lm/run_config.h), trained for
// warmup + timed steps with seed 0 on random tokens (the torch script draws the same ones).
struct BenchSpec {
  std::string name;
  RunConfig run;
  int64_t warmup = 3;  // untimed steps first
  int64_t timed = 5;   // steps whose median is reported
};

// The presets of train/lm/run_config.h (micro, mini, small, base) with the residual mode and their
// warm-up and timed steps from the same table; throws listing the names for another.
const std::vector<std::string>& bench_config_names();
BenchSpec bench_spec(const std::string& name, ResidualMode mode = residual_mode("rd_attnres"));

// One GEMM as the forward of a Linear computes it: [M, K] · [N, K]ᵀ -> [M, N].
struct GemmShape {
  int64_t M = 0, K = 0, N = 0;
  std::string what;  // "head", "ffn up/gate", "ffn down", "attention projection"
  double flops() const { return 2.0 * double(M) * double(K) * double(N); }
  json::Value to_json() const;  // {M, K, N, what}
};
// The largest GEMM (by FLOPs) of one training step's forward: rows M = batch·seq.
GemmShape largest_gemm(const MicroLMConfig& config, int64_t batch);

// Parameters that multiply activations in a GEMM: every 2-D weight except embedding tables
// that are only looked up; a tied head counts token.weight once (it is the head's matrix).
int64_t matmul_parameters(const MicroLM& model);
// FLOPs of one training step: 6·N·tokens (forward 2, backward 4 per parameter and token) plus
// attention 12·layers·batch·seq²·dim (QKᵀ and PV, forward and backward, counted over the full
// T×T square as PaLM's MFU does, although the causal kernel skips the upper half).
double training_step_flops(int64_t matmul_params, const MicroLMConfig& config, int64_t batch);

// Median GFLOP/s of cblas_sgemm on `shape` (random operands, one warm-up call, then at least
// min_runs calls and min_seconds). Runs at the current thread count, OpenBLAS threading itself.
double measure_sgemm_gflops(const GemmShape& shape, int min_runs = 3, double min_seconds = 0.3);

// The square GEMM the peaks are measured on besides the model's largest: n×n×n, large enough for
// every kernel here to reach its asymptotic rate on a few cores.
GemmShape square_gemm(int64_t n = 2048);

// The best kernel of one precision on one shape at the current thread count: every candidate is
// timed as measure_sgemm_gflops times cblas_sgemm (median of at least min_runs calls and
// min_seconds), and the fastest stands for the machine's limit. Candidates:
//   float32: OpenBLAS's cblas_sgemm threading itself (the core select_gemm_kernels chose) and
//            oneDNN's dnnl_sgemm (OpenMP threads);
//   bf16:    dg::gemm in bf16 precision (float32 operands rounded to bf16 on every call, the
//            pieces on OpenMP threads: what a bf16 training step runs) and a oneDNN matmul on
//            operands already in bf16 (no rounding pass: the kernel alone).
struct KernelRate {
  std::string kernel;  // "openblas sgemm (SkylakeX)", "dnnl_sgemm", ...
  double gflops = 0;
};
struct GemmPeak {
  std::string precision;  // "float32" or "bf16"
  GemmShape shape;
  std::vector<KernelRate> kernels;  // every candidate, in the order above
  double gflops = 0;                // the best candidate's rate (0: not measured)
  std::string kernel;               // its name
  json::Value to_json() const;
  static GemmPeak from_json(const json::Value& v);
};
// Throws std::runtime_error with bf16_unsupported_reason() for bf16 on a CPU without it.
GemmPeak measure_gemm_peak(const GemmShape& shape, MatmulPrecision precision, int min_runs = 3,
                           double min_seconds = 0.3);

// Resident memory of this process from /proc/self/status, in KiB: VmHWM (the process-lifetime
// peak) and VmRSS (now). 0 when the file cannot be read.
int64_t peak_rss_kib();
int64_t current_rss_kib();
std::string load_average();  // first three fields of /proc/loadavg, or "?"

struct BenchOptions {
  int threads = 1;
  // Data parallel over these ranks (train/data_parallel.h; null = one process): every rank runs
  // the config's batch, and tokens/s counts the global batch (ranks x accum x batch).
  Collectives* world = nullptr;
  bool profile = true;         // per-family times during the timed steps
  bool measure_peak = true;    // the GEMM peaks of the run's precision (a few seconds)
  int64_t peak_square = 2048;  // the side of the square GEMM of the peak
  std::function<void(const std::string&)> on_message;  // progress lines
};

// One measurement; also the record `depthgrad bench --one` prints and the torch script mirrors
// (JSON keys are shared; fields the torch side does not measure stay 0 / empty).
struct BenchResult {
  std::string impl = "depthgrad";  // or "torch"
  std::string config, mode;
  int threads = 1;
  int ranks = 1;                      // MPI ranks (threads is per rank)
  std::string precision = "float32";  // the matmul precision of the steps (training.precision)
  int64_t accum = 1;                  // micro-batches per step (training.accum)
  int64_t parameters = 0, matmul_params = 0, batch = 0, seq_len = 0;
  int64_t warmup = 0, timed = 0;
  std::vector<double> step_seconds;  // timed steps
  std::vector<double> losses;        // every step
  double median_step_seconds = 0;
  double tokens_per_second = 0;
  double step_flops = 0;  // of the global step: ranks x accum micro-batches
  double achieved_gflops = 0;
  GemmShape gemm;
  // The machine's limit at this thread count in this precision: the best kernel on square_gemm()
  // (the rows of bench --mpi measure none)
  // (peak) and on the model's largest GEMM (gemm_peak); the fractions are achieved_gflops over
  // them. Zero when not measured (--no-peak, MPI rows); torch rows carry depthgrad's.
  GemmPeak peak, gemm_peak;
  double peak_fraction = 0, gemm_peak_fraction = 0;
  // OpenBLAS's cblas_sgemm alone on the largest GEMM (float32 rows, the core
  // select_gemm_kernels chose) and achieved_gflops over it; in --json only.
  double sgemm_gflops = 0;
  double sgemm_fraction = 0;
  // The OpenBLAS core the process ran (torch: read from its OpenBLAS), and whether
  // OPENBLAS_CORETYPE was set to depthgrad's choice for it (torch rows of --compare-torch).
  std::string blas_core;
  bool blas_core_forced = false;
  int64_t peak_rss_kib = 0;
  int64_t baseline_rss_kib = 0;  // RSS before the model was built
  // Tensor buffers (tensor.h storage_stats): in use after the model, its flat gradients and the
  // optimizer were built (the parameter state), the peak in use during any step, and the bytes
  // the storage cache held unused after the last step. 0 for torch.
  int64_t state_tensor_kib = 0, peak_tensor_kib = 0, cached_tensor_kib = 0;
  bool profiled = false;
  std::array<double, kOpFamilies> family_seconds{};  // mean per timed step
  double untimed_seconds = 0;  // mean step − Σ families: tape walk, frees, sampling, loss read
  double mean_step_seconds = 0;

  json::Value to_json() const;
  static BenchResult from_json(const json::Value& v, const std::string& source);
};

BenchResult run_bench(const BenchSpec& spec, const BenchOptions& options);

// ---- equivalence check with tools/torch_reference.py
// Weights drawn so every part of the model
// matters to the loss (init N(0, 0.02) makes logits ~0 and hides attention and routing): matrices
// N(0, 1/in), token.weight N(0, 1/dim), norm gains U(0.5, 1.5). Then one fixed batch of random
// tokens, its loss, and the losses after each of `steps` full training steps on that batch (zero
// grad, forward, backward, clip 1.0, AdamW).
struct CheckResult {
  std::string config;
  int64_t parameters = 0;
  double loss = 0;
  std::vector<double> losses_after;  // loss after step 1..steps
};
// Writes <dir>/<config>.safetensors (the weights under their parameter names) and
// <dir>/<config>.tokens.json (model config, batch, inputs, targets, the losses above).
CheckResult write_check(const std::string& dir, const BenchSpec& spec, int64_t steps = 3);

// The table of `depthgrad bench` (one row per result).
std::string bench_table(const std::vector<BenchResult>& results);
// Every GEMM kernel timed for the peaks, per row: shape, GFLOP/s, which one is the peak.
std::string peak_table(const std::vector<BenchResult>& results);
// Per-family breakdown table (profiled depthgrad results only).
std::string breakdown_table(const std::vector<BenchResult>& results);
// A row's name in the tables: impl, precision unless float32, "same core" for a forced torch row.
std::string bench_label(const BenchResult& r);
// depthgrad vs torch, matched by (config, threads, precision): tokens/s ratio, ms per step, peak
// memory ratio; one line per torch result.
std::string compare_table(const std::vector<BenchResult>& depthgrad,
                          const std::vector<BenchResult>& torch);

}  // namespace dg
