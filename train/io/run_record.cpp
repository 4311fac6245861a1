// Provenance and timestamps for result files (see run_record.h).
#include "train/io/run_record.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/utsname.h>

#include <chrono>
#include <ctime>

#include "dg_build_commit.h"  // DG_GIT_COMMIT, generated at build time (tools/build_commit.cmake)
#include "tensor/cpu_features.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"

namespace dg {

const char* build_version() { return DG_VERSION; }
const char* build_commit() { return DG_GIT_COMMIT; }
const char* build_compiler() { return DG_COMPILER; }

std::string timestamp_now() {
  auto now = std::chrono::system_clock::now();
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y%m%d-%H%M%S}-{:06d}", tm, micros);
}

json::Value provenance_json(int threads) {
  json::Object p;
  p.emplace_back("tool", "depthgrad");
  p.emplace_back("version", build_version());
  p.emplace_back("code_commit", build_commit());
  p.emplace_back("compiler", build_compiler());
  select_gemm_kernels();  // before OpenBLAS names its core
  p.emplace_back("blas", blas_config());
  p.emplace_back("blas_threading", blas_parallel_mode());
  p.emplace_back("threads", threads);
  struct utsname u {};
  if (uname(&u) == 0)
    p.emplace_back("platform", fmt::format("{} {} {}", u.sysname, u.release, u.machine));
  p.emplace_back("device", "cpu");
  p.emplace_back("machine", machine_json());
  p.emplace_back("matmul_precision", precision_name(matmul_precision()));
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  p.emplace_back("created_at", fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm));
  return json::Value(std::move(p));
}

json::Value machine_json() {
  const CpuFeatures& cpu = cpu_features();
  const GemmKernelChoice& blas = select_gemm_kernels();
  json::Object m;
  m.emplace_back("cpu", cpu.model);
  m.emplace_back("vendor", cpu.vendor);
  m.emplace_back("instruction_sets", cpu.summary());
  m.emplace_back("blas_core_loaded", blas.blas_core_loaded);
  m.emplace_back("blas_core", blas.blas_core);
  m.emplace_back("blas_core_reason", blas.reason);
  m.emplace_back("bf16_kernel", bf16_kernel_name());
  m.emplace_back("bf16_small_kernel", gemm_bf16_small_available() ? gemm_bf16_small_name() : "");
  m.emplace_back("bf16_unsupported", bf16_unsupported_reason());
  return json::Value(std::move(m));
}

namespace {
// The bf16 kernels and when each runs (gemm_kernels.h, gemm_bf16_small.h, bf16_weights.h).
std::string bf16_choice_text(const std::string& onednn) {
  if (onednn.empty()) return "unsupported: " + bf16_unsupported_reason();
  std::string text = fmt::format(
      "oneDNN {} (every dg::gemm, and one-thread products from 2^22 "
      "multiply-adds)",
      onednn);
  if (gemm_bf16_small_available())
    text += fmt::format("; smaller one-thread products (attention's per head): {}",
                        gemm_bf16_small_name());
  return text + "; the Trainer's weights read from a bf16 copy rounded once per optimiser step";
}
}  // namespace

std::string machine_text() {
  const CpuFeatures& cpu = cpu_features();
  const GemmKernelChoice& blas = select_gemm_kernels();
  const std::string bf16 = bf16_kernel_name();
  return fmt::format(
      "cpu: {} ({}); instruction sets: {}\n"
      "float32 GEMM: OpenBLAS core {} (OpenBLAS loaded {}: {})\n"
      "bf16 GEMM: {}\n",
      cpu.model, cpu.vendor, cpu.summary().empty() ? "none of those depthgrad uses" : cpu.summary(),
      blas.blas_core, blas.blas_core_loaded, blas.reason, bf16_choice_text(bf16));
}

}  // namespace dg
