// The run record every command writes beside its results: who made them (version, commit,
// compiler, BLAS and its threading, the CPU, its instruction sets and the GEMM kernels chosen,
// threads, platform) and when, plus run-folder timestamps.
// It does not decide where runs go (callers pass their output folder) or write any file.
#pragma once
#include <string>

#include "train/io/json.h"

namespace dg {

// This build: the project version, the git commit it was built from ("-dirty" when tracked
// files differed from it, "unknown" without git), the compiler.
const char* build_version();
const char* build_commit();
const char* build_compiler();

// Provenance shared by every command's output: version, commit, compiler, BLAS, threads, the
// machine (machine_json), the matmul precision in force, time.
json::Value provenance_json(int threads);

// The CPU and the GEMM kernels that run on it (tensor/cpu_features.h, tensor/gemm_kernels.h):
// {cpu, vendor, instruction_sets, blas_core_loaded, blas_core, blas_core_reason, bf16_kernel,
// bf16_unsupported}. bf16_kernel is "" and bf16_unsupported says why on a CPU without bf16.
json::Value machine_json();
// The same in three lines for the top of a command's output.
std::string machine_text();

// A timestamp directory name: YYYYmmdd-HHMMSS-ffffff (UTC).
std::string timestamp_now();

}  // namespace dg
