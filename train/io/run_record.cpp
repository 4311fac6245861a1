// Provenance and timestamps for result files (see run_record.h).
#include "train/io/run_record.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/utsname.h>

#include <chrono>
#include <ctime>

#include "dg_build_commit.h"  // DG_GIT_COMMIT, generated at build time (tools/build_commit.cmake)
#include "tensor/cpu_features.h"
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
  const GemmKernelChoice& kernels = select_gemm_kernels();  // before OpenBLAS names its core
  p.emplace_back("blas", blas_config());
  p.emplace_back("cpu", cpu_features().model);
  p.emplace_back("cpu_features", cpu_features().summary());
  json::Object gemm;
  gemm.emplace_back("float32", fmt::format("OpenBLAS {} ({})", kernels.blas_core, kernels.reason));
  const std::string bf16 = bf16_kernel_name();
  gemm.emplace_back("bf16",
                    bf16.empty() ? "unsupported: " + bf16_unsupported_reason() : "oneDNN " + bf16);
  gemm.emplace_back("matmul_precision", precision_name(matmul_precision()));
  p.emplace_back("gemm_kernels", json::Value(std::move(gemm)));
  p.emplace_back("blas_threading", blas_parallel_mode());
  p.emplace_back("threads", threads);
  struct utsname u {};
  if (uname(&u) == 0)
    p.emplace_back("platform", fmt::format("{} {} {}", u.sysname, u.release, u.machine));
  p.emplace_back("device", "cpu");
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  p.emplace_back("created_at", fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", tm));
  return json::Value(std::move(p));
}

}  // namespace dg
