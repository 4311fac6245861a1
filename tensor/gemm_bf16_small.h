// A bf16 GEMM for small one-thread products (attention's per-head QKᵀ, PV and their backward
// products), written on AVX512_BF16's pair dot product VDPBF16PS: 32 bf16 multiply-adds into 16
// float32 lanes per instruction. oneDNN's matmul (tensor/gemm_kernels.h) pays per call for
// finding its primitive, rounding its operands and dispatching (measured at 5-7 µs inside a
// training step, about 1 µs in a warm loop), which at these sizes made it slower than sgemm;
// this kernel has no per-call setup beyond rounding and packing its two operands into buffers
// kept per thread.
//
// Contract: dg::gemm's (tensor/kernels_matmul.h): row-major C [M, N] = alpha · op(A) [M, K] ·
// op(B) [K, N] + beta · C, beta = 0 never reads C, on the calling thread, no allocation once its
// buffers have grown. The operands are rounded to bf16 by dg::to_bf16 (nearest, ties to even,
// NaN kept) and the products accumulated in float32, as gemm_bf16_one_thread does; the results
// differ from oneDNN's in summation order only. The plain reference beside it is
// dg::ref_gemm_bf16 (the same rounding, sums in double).
//
// Refuses: it runs only where gemm_bf16_small_available() (AVX512_BF16 with AVX-512 F, BW, VL
// saved by the OS); elsewhere it throws std::runtime_error. It does not check sizes or leading
// dimensions (its caller, gemm_one_thread, runs after dg::gemm's checks or from kernels whose
// shapes are fixed), and it does not split work over threads.
//
// Denormals: VDPBF16PS treats denormal inputs as zero, flushes denormal outputs to zero and
// rounds to nearest even whatever MXCSR says (Intel's instruction reference). So a product with
// a factor below 2⁻¹²⁶ in magnitude counts as zero, and a partial sum that falls below 2⁻¹²⁶
// becomes zero: at most K · 2⁻¹²⁶ · |alpha| of absolute error beyond float32 accumulation's for
// ordinary factors, but a denormal factor times a huge one (1e-39 · 1e30) is lost entirely.
// ref_gemm_bf16 keeps denormals. Attention's operands (activations, softmax weights and their
// gradients) are never near 2⁻¹²⁶ in practice.
//
// Error bound against ref_gemm_bf16 (tests/test_gemm_bf16_small.cpp): products of two bf16 values
// are exact in float32, and each of the K additions rounds once, so |fast − ref| ≤ K · 2⁻²³ ·
// |alpha| · Σ_k |bf16(a)·bf16(b)|, plus beta · C's rounding, for factors that are not denormal.
#pragma once
#include <cstdint>

namespace dg {

// C [M, N] = alpha · bf16(op(A)) · bf16(op(B)) + beta · C (see above), on the calling thread.
void gemm_bf16_small(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc);

// Whether this CPU runs gemm_bf16_small (AVX512_BF16, AVX-512 F, BW and VL).
bool gemm_bf16_small_available();
// One line for reports: "avx512_bf16 dot products (8 × 32 and 16 × 16 register blocks)".
const char* gemm_bf16_small_name();

// Whether gemm_one_thread in bf16 precision sends an M × N × K product to gemm_bf16_small rather
// than cblas_sgemm: the CPU has it (cpu_has_kernel; gemm_one_thread passes
// gemm_bf16_small_available()), K ≥ 16, N ≥ 32 and the product at least 2^17 multiply-adds.
// Measured with tools/bench_gemm_small.cpp (figures in kernels_matmul.h): with N = 16 (a head size
// of 16 as the output's width: P·V, Pᵀ·dO) the 16 × 16 blocks run no faster than sgemm; at
// 2^16 (64 × 64 × 16) the kernel won on Q·Kᵀ but lost on an untransposed B; from 2^17 it is
// ahead on attention's three cases (K = 16 included) or within the noise (P·V at 64 × 32 × 64,
// four runs: 171 to 229 GFLOP/s against sgemm's 197 to 217). Below 16, nothing was measured.
// Products of kBf16OneThreadMinWork and more go to oneDNN instead (gemm_one_thread decides that
// first).
constexpr int64_t kBf16SmallMinWork = int64_t(1) << 17;
constexpr int64_t kBf16SmallMinK = 16, kBf16SmallMinN = 32;
bool gemm_bf16_small_suits(int64_t M, int64_t N, int64_t K, bool cpu_has_kernel);

}  // namespace dg
