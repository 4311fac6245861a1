// GEMM for depthgrad: row-major wrappers over OpenBLAS (cblas_sgemm / cblas_dgemm, or the bf16
// kernel when the matmul precision is bf16: tensor/gemm_kernels.h) that take
// transposed operands by flag, a batched form whose entries may share an output matrix, the
// strided copy/add kernels that make views BLAS-readable (or scatter gradients into views), and
// a naive reference beside each fast kernel for the tests (tests/test_kernels_matmul.cpp).
// Does not record autograd (autograd/ops_matmul.cpp and ops_shape.cpp do), has no GEMM
// micro-kernels of its own and never promotes dtypes.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// ---- GEMM --------------------------------------------------------------------------------------
// C [M, N] = alpha · op(A) [M, K] · op(B) [K, N] + beta · C, every matrix row-major.
// op(A) = A stored [M, K] with row stride lda ≥ K, or, when trans_a, Aᵀ with A stored [K, M]
// (lda ≥ M); B likewise. beta = 0 never reads C (C may be uninitialised). Throws naming "gemm"
// when a size or leading dimension is negative, too small, or does not fit BLAS's int.
// Threads: OpenBLAS's own threading is never used, because its rounding changes with the
// thread count (its threaded path blocks K differently, and how it splits M and N can switch
// kernels). Instead the output is cut into gemm_pieces(M, N, K) pieces along the larger of M and
// N, a count fixed by the shape and the machine's core count, never by the thread count; each
// piece is a one-thread BLAS call and OpenMP spreads the pieces over the threads. A float32
// product whose K is at least twice max(M, N) (a weight gradient over a batch's rows) is cut along
// K instead, into pieces of at least 512 (as many as cores), summed into C in piece order
// (kernels_matmul.cpp: the M or N cut made every piece pack the whole shared operand). Results are
// bit-identical at any thread count (tests/test_kernels_matmul.cpp checks this).
// Up to kGemmParallelMinWork multiply-adds the pieces run in order on the calling thread, at any
// thread count: waking the other threads (about 20 µs with passive waiting on an idle machine,
// far more on a busy one) costs as much as it saves there. Only where the pieces run changes,
// never the pieces, so this cut changes no bit either.
constexpr int64_t kGemmSerialMaxWork =
    int64_t(1) << 18;  // up to this M·N·K: one call (OpenBLAS's one-thread limit)
constexpr int64_t kGemmMinPiece = 128;                      // rows (or columns) per piece, at least
constexpr int64_t kGemmParallelMinWork = int64_t(1) << 23;  // about 140 µs on one core
// min(physical cores, max(M, N) / 128 (/ 64 from 2^24 multiply-adds)), ≥ 1
int64_t gemm_pieces(int64_t M, int64_t N, int64_t K);
// In bf16 matmul precision, a16 / b16 (optional) are A and B already rounded (Bf16Rounded,
// tensor/gemm_kernels.h: laid out as A and B, same leading dimensions); an operand without one is
// read from a kept bf16 copy (tensor/bf16_weights.h) or rounded on the call. Ignored in float32
// precision and for float64.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const uint16_t* a16 = nullptr, const uint16_t* b16 = nullptr);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc, const uint16_t* a16 = nullptr, const uint16_t* b16 = nullptr);

// The same contract without pieces or OpenMP: one BLAS call on the calling thread, for kernels
// that already run in their own parallel loop (attention's per-head matrices, conv's groups). No
// size checks beyond BLAS's own. float32 follows the matmul precision (tensor/gemm_kernels.h):
// in bf16 precision a product of at least kBf16OneThreadMinWork multiply-adds goes to oneDNN, a
// smaller one to gemm_bf16_small (tensor/gemm_bf16_small.h: AVX512_BF16 dot products, no
// per-call setup) when gemm_bf16_small_suits it, else it stays float32 (cblas_sgemm). oneDNN's
// per-call cost (primitive lookup, execute, rounding its operands) once made a bf16 training
// step's attention 1.6× slower than float32 at small models' sizes, hence the split.
// Measured with tools/bench_gemm_small.cpp, one thread, an AMD EPYC Turin-class virtual CPU
// (AVX512_BF16, no AMX), GFLOP/s of sgemm / gemm_bf16_small / oneDNN on a shared, noisy machine
// (±15% between runs):
//   64 × 256 × 32   (Q·Kᵀ, head size 32, 256 keys)   138 / 288 / 209
//   64 × 32 × 256   (P·V)                            210 / 267 / 192
//   256 × 32 × 64   (Pᵀ·dO)                          209 / 284 / 204
//   64 × 256 × 16   (Q·Kᵀ, head size 16)             104 / 163 / 119
//   64 × 16 × 256   (P·V, head size 16)              145 / 145 / 103  (N = 16: stays sgemm)
//   64 × 1024 × 64  (Q·Kᵀ, 2^22)                     120 / 188 / 229  (oneDNN from here)
// Float32 precision and float64 always run cblas_sgemm / cblas_dgemm.
constexpr int64_t kBf16OneThreadMinWork = int64_t(1) << 22;
void gemm_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc);
void gemm_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                     const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                     double* C, int64_t ldc);

// The same contract as a naive triple loop accumulating in double.
template <class T>
void ref_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// ---- batched GEMM ---------------------------------------------------------------------------
// Entry i multiplies the matrices at A + a_offsets[i] and B + b_offsets[i] (same dims and
// leading dimensions for all entries) into the matrix at C + c_offsets[i]. Entries that share a
// c_offset form one group that sums into its C in entry order: C_g = beta·C_g + Σ_{i in g}
// alpha·op(A_i)·op(B_i) (the first gemm of a group uses beta, the rest 1). That is how
// broadcast batch axes are reduced in backward. Groups are independent: with many small
// matrices an OpenMP loop runs one group per iteration (OpenBLAS runs single-threaded inside
// it); otherwise groups run in order and each GEMM spreads its own pieces (gemm). Either way every
// output matrix has one owner and the same summation order, so results do not depend on the thread
// count.
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const std::vector<int64_t>& a_offsets, const T* B, int64_t ldb,
                  const std::vector<int64_t>& b_offsets, T beta, T* C, int64_t ldc,
                  const std::vector<int64_t>& c_offsets);
// Uniform strides: entry i at A + i·stride_a, B + i·stride_b, C + i·stride_c (a stride of 0
// reuses one matrix, e.g. a shared weight, or a shared output that sums the batch).
template <class T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch);

// gemm_batched spreads groups over OpenMP threads (instead of letting gemm spread each GEMM's
// pieces) when each GEMM does at most kBatchParallelMaxWork multiply-adds (M·N·K) and all of them
// together more than kBatchParallelMinWork (below that a parallel region costs more than it
// saves: the same bound as one GEMM's).
constexpr int64_t kBatchParallelMaxWork = int64_t(1) << 22;
constexpr int64_t kBatchParallelMinWork = kGemmParallelMinWork;

// ---- how BLAS reads a tensor's last two axes in place ---------------------------------------
// For t [.., R, C] with strides (sr, sc) on its last two axes: row-major as is (trans = false,
// ld = sr, needs sc = 1 and sr ≥ C) or as the transpose of a row-major [C, R] matrix (trans =
// true, ld = sc, needs sr = 1 and sc ≥ R), e.g. a transposed view of a contiguous matrix. ok =
// false when neither holds (stride-0 or otherwise scattered axes): the caller must copy.
struct MatrixLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};
MatrixLayout blas_layout(const Tensor& t);

// Row stride when t [.., C] can be read as one row-major [numel / C, C] matrix in place (last
// stride 1, every leading axis steps by whole rows), else -1. linear uses it to run one GEMM.
int64_t rows_ld(const Tensor& t);

// ---- naive matmul reference -----------------------------------------------------------------
// a [.., M, K] @ b [.., K, N] with broadcast batch axes, any strides, double accumulation.
Tensor ref_matmul(const Tensor& a, const Tensor& b);

// ---- strided copy / add ---------------------------------------------------------------------
// dst = src and dst += src over one shape and dtype (float32/float64), any strides on either
// side. dst must not have two elements at one address (no stride-0 axis of size > 1) and must
// not overlap src. Adjacent axes that are contiguous in both are merged; rows run in parallel,
// each written by one thread.
void copy_strided(Tensor& dst, const Tensor& src);
void add_strided(Tensor& dst, const Tensor& src);
void ref_copy_strided(Tensor& dst, const Tensor& src);
void ref_add_strided(Tensor& dst, const Tensor& src);

// ---- column sums (the bias gradient of linear) ----------------------------------------------
// out[j] += Σ_i x[i·ld + j] for x [rows, cols]; each column is summed in row order, in double,
// by one owner thread (blocks of columns per thread), so the result does not depend on thread
// count.
template <class T>
void add_column_sums(const T* x, int64_t rows, int64_t cols, int64_t ld, T* out);
template <class T>
void ref_add_column_sums(const T* x, int64_t rows, int64_t cols, int64_t ld, T* out);

}  // namespace dg
