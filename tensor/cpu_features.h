// What this CPU can run, read from CPUID and the OS's saved-state mask (XGETBV), so kernel
// choices follow the machine rather than what an older library recognises. x86-64 only: on other
// architectures every flag is false and the name is the kernel's machine string. It reads; it
// chooses nothing (tensor/gemm_kernels.h does).
#pragma once
#include <string>

namespace dg {

struct CpuFeatures {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string model;   // the brand string, e.g. "AMD EPYC 9R14 96-Core Processor"
  bool avx2 = false, fma = false;
  // AVX-512 counts only when the OS saves the zmm and opmask registers (XCR0 bits 5-7).
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_bf16 = false;  // VDPBF16PS, VCVTNE2PS2BF16
  // AMX counts only when the OS saves tile state (XCR0 bits 17-18); Linux also wants a
  // per-process permission request, which the library that uses the tiles makes.
  bool amx_tile = false, amx_bf16 = false;

  // AVX-512 foundation plus the byte/word, doubleword/quadword and vector-length extensions:
  // what OpenBLAS's SkylakeX kernels and oneDNN's avx512_core need.
  bool avx512_core() const { return avx512f && avx512bw && avx512dq && avx512vl; }
  // The instruction sets that matter to depthgrad's kernels, in one line:
  // "avx2 fma avx512f avx512bw avx512dq avx512vl avx512_bf16 amx_bf16".
  std::string summary() const;
};

// This machine's features, read once.
const CpuFeatures& cpu_features();

}  // namespace dg
