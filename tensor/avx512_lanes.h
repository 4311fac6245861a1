// Lane masks for the tails of AVX-512 loops, shared by the hand-written GEMM kernels
// (gemm_bf16_small.cpp, gemm_packed.cpp).
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace dg {

// The lowest min(max(n, 0), 16) lanes of a 16-lane vector.
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

}  // namespace dg
#endif
