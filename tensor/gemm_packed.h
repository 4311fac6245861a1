// A GEMM whose B operand is packed once and multiplied many times: C = A · B for a B that stays
// the same over many products while A changes (a recurrent layer's W_hhᵀ over its time steps).
// OpenBLAS packs both operands on every call (for the LSTM's steps that was a tenth of the
// step's time); here B is laid out once in panels of 32 columns, each [K, 32] contiguous, and each
// product packs nothing. It does not split work over threads or take a transposed A.
//
// Contract: C [M, N] = A [M, K] · op(B) [K, N] + beta · C, row-major, on the calling thread
// (beta = 0 never reads C). op(B) is given as to dg::gemm (stored [K, N], or [N, K] with trans_b).
// Precision (fixed when B is packed): float32 sums each element's products in one FMA chain in k
// order per depth block, the blocks cut as OpenBLAS's level-3 driver cuts K for its AVX-512
// kernels (at most 448 on SkylakeX, 320 on Cooperlake) and added into C in turn (C = beta · C, then
// + each block's sums): so where OpenBLAS runs those kernels through that driver the bits are
// sgemm's (2-layer LSTM and GRU steps at batch 32, H 64, 100, 256 and 512 gave the bits of the
// sgemm steps, at 1 and 2 threads); small products OpenBLAS sends to its small-matrix kernels
// differ from it in the last bits. bf16 rounds B once when packed and A per product (dg::to_bf16)
// and accumulates pairs with VDPBF16PS (gemm_bf16_small.h's denormal caveat applies): not oneDNN's
// summation order. The plain references are gemm_one_thread (float32) and ref_gemm_bf16 (bf16). On
// a CPU without AVX-512 (float32) or AVX512_BF16 (bf16), B is kept as given and each product runs
// gemm_one_thread or gemm_bf16_one_thread.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/gemm_kernels.h"

namespace dg {

class PackedB {
 public:
  static constexpr int64_t kPanel = 32;  // columns per panel (two vectors of 16 floats)

  PackedB() = default;
  PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
          MatmulPrecision precision);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  MatmulPrecision precision() const { return precision_; }

 private:
  friend void gemm_packed_b(int64_t M, const float* A, int64_t lda, const PackedB& B, float beta,
                            float* C, int64_t ldc);
  struct Free {
    void operator()(void* p) const;
  };
  int64_t K_ = 0, N_ = 0, blas_depth_ = 0;  // blas_depth_: the depth cut (gemm_packed.cpp)
  MatmulPrecision precision_ = MatmulPrecision::float32;
  bool kernel_ = false;                 // packed for this file's kernels (else: plain, below)
  std::unique_ptr<void, Free> panels_;  // float32 [panels][K][32] or bf16 pairs [panels][Kp][32]
  std::vector<float> plain_;            // op(B) [K, N] as given, where the kernels do not run
};

// C [M, N] = A [M, K] · B + beta · C (above), on the calling thread.
void gemm_packed_b(int64_t M, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                   int64_t ldc);

}  // namespace dg
