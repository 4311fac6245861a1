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

// Provenance shared by every command's output: version, commit, compiler, BLAS, CPU, GEMM
// kernels (float32, bf16, the precision in force), threads, time.
json::Value provenance_json(int threads);

// A timestamp directory name: YYYYmmdd-HHMMSS-ffffff (UTC).
std::string timestamp_now();

}  // namespace dg
