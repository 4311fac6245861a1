// GEMM wrappers, batched GEMM, strided copy/add and column sums (see kernels_matmul.h).
#include "tensor/kernels_matmul.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "tensor/bf16_weights.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_kernels.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/threads.h"

namespace dg {

// ---- GEMM -----------------------------------------------------------------------------------

// A deep product on a small output (the Fashion-MNIST CNN's Linear(3136, 128) on a batch of 128:
// 128 × 128 × 3136) is one 128-row piece, so it ran on one thread at any count (1.07 ms of a
// 27 ms 2-thread step); from kGemmDeepWork multiply-adds pieces may be half as tall, each still
// some 85 µs of work, far above a thread's wake-up (bench_cnn_ops: linear 3136->128).
constexpr int64_t kGemmDeepWork = int64_t(1) << 24;

int64_t gemm_pieces(int64_t M, int64_t N, int64_t K) {
  static const int64_t cores = physical_cores();
  if (M * N * K <= kGemmSerialMaxWork) return 1;
  const int64_t extent = std::max(M, N);
  const int64_t min_piece = M * N * K >= kGemmDeepWork ? kGemmMinPiece / 2 : kGemmMinPiece;
  return std::clamp<int64_t>(extent / min_piece, 1, cores);
}

namespace {
void check_gemm_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda,
                     int64_t ldb, int64_t ldc) {
  auto fail = [&](const char* what) {
    throw std::invalid_argument(
        fmt::format("gemm: {} (M={}, N={}, K={}, trans_a={}, trans_b={}, lda={}, ldb={}, ldc={})",
                    what, M, N, K, trans_a, trans_b, lda, ldb, ldc));
  };
  if (M < 0 || N < 0 || K < 0) fail("negative size");
  if (lda < std::max<int64_t>(1, trans_a ? M : K)) fail("lda is smaller than a row of A");
  if (ldb < std::max<int64_t>(1, trans_b ? K : N)) fail("ldb is smaller than a row of B");
  if (ldc < std::max<int64_t>(1, N)) fail("ldc is smaller than a row of C");
  for (int64_t v : {M, N, K, lda, ldb, ldc})
    if (v > INT_MAX) fail("a size exceeds BLAS's 32-bit int");
}

// C = beta·C when there is nothing to multiply (K = 0); beta = 0 writes zeros without reading.
template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
}

CBLAS_TRANSPOSE flag(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// One-thread float32 GEMM in the process's matmul precision (gemm_kernels.h).
void blas_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (matmul_precision() == MatmulPrecision::bf16)
    return gemm_bf16_one_thread(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  cblas_sgemm(CblasRowMajor, flag(ta), flag(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}
void blas_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
               int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(ta), flag(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}

// Row-major C [M, N] = alpha·op(A)·op(B) + beta·C without BLAS's own threads. OpenBLAS's
// threaded path blocks K differently from its one-thread path, and its results also change with
// how M and N are split (small-matrix kernels), so the split is fixed here by the shape and the
// machine (gemm_pieces), never by the thread count: pieces along the larger of M and N, each a
// one-thread GEMM, run by an OpenMP loop (or in order: at one thread, inside a parallel region,
// or up to kGemmParallelMinWork). The same calls in any order give the same bits.
// piece_fn(split_m, lo, len) computes rows (split_m) or columns [lo, lo + len) of C.
//
// OpenBLAS's OpenMP build threads a call above kGemmSerialMaxWork unless it runs inside a parallel
// region or omp_get_max_threads() is 1. So to run such pieces in order on the calling thread
// while more threads are set, the calling thread's OpenMP count is 1 for the duration of the
// calls (OneOmpThread, tensor/threads.h).

template <class Piece>
void for_each_piece(int64_t M, int64_t N, int64_t K, const Piece& piece_fn) {
  const bool split_m = M >= N;
  const int64_t extent = split_m ? M : N;
  const int64_t pieces = gemm_pieces(M, N, K);
  const int64_t piece = ((extent + pieces - 1) / pieces + 15) / 16 * 16;
  const int64_t count = (extent + piece - 1) / piece;
  auto run_piece = [&](int64_t p) {
    const int64_t lo = p * piece;
    piece_fn(split_m, lo, std::min(piece, extent - lo));
  };
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (nt == 1 || M * N * K <= kGemmParallelMinWork) {
    // In order on this thread: at nt = 1 (one thread set, or inside a parallel region) BLAS
    // stays on it by itself; above, it is held there.
    OneOmpThread hold(nt > 1);
    for (int64_t p = 0; p < count; ++p) run_piece(p);
    return;
  }
  // The loop runs in a parallel region even for one piece: inside it BLAS stays on one thread.
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t p = 0; p < count; ++p) run_piece(p);
}

// A float32 product whose K is long against its output, a weight gradient dW [out, in] = dyᵀ·x
// over every row of a batch, is cut along K instead of M or N: cut along M or N, every piece packs
// the whole of the operand the pieces share (x [4096, 256] for the encoder's dW of linear1, once
// per piece), while K pieces share nothing. Piece 0 accumulates into C (with beta), the others
// into scratch matrices that are then added to C in piece order: the pieces and that order are
// fixed by the shape and the machine (as gemm_pieces), so the bits do not depend on the thread
// count. Measured on the encoder step's four weight-gradient products (K = 4096 rows), one
// thread, CPU time, the best of 15, two pieces cut along M or N / along K (plus the sum) / one
// call: 256×1024 24.1 / 23.5 / 23.1 ms, 1024×256 22.9 / 22.7 / 22.4, 768×256 17.3 / 17.1 / 17.0,
// 256×256 6.3 / 5.9 / 5.9 (at two threads each thread saves half the difference, and the sum
// is split too). float64 keeps the M/N cut (its goldens).
constexpr int64_t kSplitKMinRatio = 2;  // K at least this many times max(M, N)
constexpr int64_t kSplitKMinPiece = 512;

int64_t split_k_pieces(int64_t M, int64_t N, int64_t K) {
  static const int64_t cores = physical_cores();
  if (M * N * K <= kGemmParallelMinWork || K < kSplitKMinRatio * std::max(M, N)) return 1;
  return std::clamp<int64_t>(K / kSplitKMinPiece, 1, cores);
}

void gemm_split_k(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  int64_t pieces) {
  const int64_t piece = ((K + pieces - 1) / pieces + 15) / 16 * 16;
  const int64_t count = (K + piece - 1) / piece;
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>((count - 1) * M * N));
  float* extra = scratch.data();
  auto run_piece = [&](int64_t p) {
    const int64_t k0 = p * piece, len = std::min(piece, K - k0);
    const float* a = ta ? A + k0 * lda : A + k0;
    const float* b = tb ? B + k0 : B + k0 * ldb;
    if (p == 0) return blas_call(ta, tb, M, N, len, alpha, a, lda, b, ldb, beta, C, ldc);
    blas_call(ta, tb, M, N, len, alpha, a, lda, b, ldb, 0.0f, extra + (p - 1) * M * N, N);
  };
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (nt == 1) {
    for (int64_t p = 0; p < count; ++p) run_piece(p);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t p = 0; p < count; ++p) run_piece(p);
  }
  // C += the other pieces' products, in piece order, row by row
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t p = 1; p < count; ++p) {
      const float* src = extra + (p - 1) * M * N + i * N;
      float* dst = C + i * ldc;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) dst[j] += src[j];
    }
}

template <class T>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const uint16_t* a16,
               const uint16_t* b16) {
  check_gemm_args(ta, tb, M, N, K, lda, ldb, ldc);
  select_gemm_kernels();
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  if constexpr (std::is_same_v<T, float>)
    if (matmul_precision() == MatmulPrecision::bf16) {
      // Both operands in bf16 once (not once per piece): given by the caller (a16, b16), read
      // from a kept bf16 copy when the operand lies in one (the weights, tensor/bf16_weights.h),
      // or rounded here. Then the same pieces (one for a product up to one call's size).
      thread_local Bf16Operands x;
      const int64_t a_rows = ta ? K : M, b_rows = tb ? N : K;
      const bool spread = M * N * K > kGemmSerialMaxWork;
      x.pack(ta, tb, M, N, K, A, lda, B, ldb, spread,
             a16 ? a16 : bf16_copy_of(A, (a_rows - 1) * lda + (ta ? M : K)),
             b16 ? b16 : bf16_copy_of(B, (b_rows - 1) * ldb + (tb ? K : N)));
      const uint16_t *a = x.a_ptr, *b = x.b_ptr;
      const int64_t a_ld = x.lda, b_ld = x.ldb;
      return for_each_piece(M, N, K, [&](bool split_m, int64_t lo, int64_t len) {
        if (split_m)
          gemm_bf16_packed_one_thread(ta, tb, len, N, K, alpha, ta ? a + lo : a + lo * a_ld, a_ld,
                                      b, b_ld, beta, C + lo * ldc, ldc);
        else
          gemm_bf16_packed_one_thread(ta, tb, M, len, K, alpha, a, a_ld,
                                      tb ? b + lo * b_ld : b + lo, b_ld, beta, C + lo, ldc);
      });
    }
  if (M * N * K <= kGemmSerialMaxWork)  // OpenBLAS runs these on the calling thread
    return blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if constexpr (std::is_same_v<T, float>)
    if (const int64_t k_pieces = split_k_pieces(M, N, K); k_pieces > 1)
      return gemm_split_k(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, k_pieces);
  for_each_piece(M, N, K, [&](bool split_m, int64_t lo, int64_t len) {
    if (split_m)  // rows [lo, lo + len) of op(A) and C
      blas_call(ta, tb, len, N, K, alpha, ta ? A + lo : A + lo * lda, lda, B, ldb, beta,
                C + lo * ldc, ldc);
    else  // columns [lo, lo + len) of op(B) and C
      blas_call(ta, tb, M, len, K, alpha, A, lda, tb ? B + lo * ldb : B + lo, ldb, beta, C + lo,
                ldc);
  });
}
}  // namespace

// C [M, N] = alpha · op(A) [M, K] · op(B) [K, N] + beta · C (row-major)
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const uint16_t* a16, const uint16_t* b16) {
  gemm_impl(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, a16, b16);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc, const uint16_t*, const uint16_t*) {
  gemm_impl(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr, nullptr);
}

void gemm_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                     int64_t ldc) {
  select_gemm_kernels();
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  if (M * N * K < kBf16OneThreadMinWork) {  // not oneDNN (see the header)
    static const bool small_kernel = gemm_bf16_small_available();
    if (matmul_precision() == MatmulPrecision::bf16 && gemm_bf16_small_suits(M, N, K, small_kernel))
      return gemm_bf16_small(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return cblas_sgemm(CblasRowMajor, flag(trans_a), flag(trans_b), int(M), int(N), int(K), alpha,
                       A, int(lda), B, int(ldb), beta, C, int(ldc));
  }
  blas_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                     const double* A, int64_t lda, const double* B, int64_t ldb, double beta,
                     double* C, int64_t ldc) {
  select_gemm_kernels();
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  blas_call(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Reference: C[i, j] = alpha · Σ_k op(A)[i, k] · op(B)[k, j] + beta · C[i, j], summed in double.
template <class T>
void ref_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      double old = beta == T(0) ? 0.0 : double(beta) * double(C[i * ldc + j]);
      C[i * ldc + j] = static_cast<T>(double(alpha) * acc + old);
    }
}
template decltype(ref_gemm<float>) ref_gemm<float>;
template decltype(ref_gemm<double>) ref_gemm<double>;

// ---- batched GEMM ---------------------------------------------------------------------------
// entries → groups by c_offset (stable: entry order kept inside a group) → one owner per group.
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const std::vector<int64_t>& a_offsets, const T* B, int64_t ldb,
                  const std::vector<int64_t>& b_offsets, T beta, T* C, int64_t ldc,
                  const std::vector<int64_t>& c_offsets) {
  const int64_t batch = static_cast<int64_t>(c_offsets.size());
  if (static_cast<int64_t>(a_offsets.size()) != batch ||
      static_cast<int64_t>(b_offsets.size()) != batch)
    throw std::invalid_argument(
        fmt::format("gemm_batched: {} A offsets, {} B offsets and {} C offsets", a_offsets.size(),
                    b_offsets.size(), batch));
  check_gemm_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (batch == 0 || M == 0 || N == 0) return;
  // order: entries sorted by (c_offset, entry index); starts[g] .. starts[g+1] is group g.
  std::vector<int64_t> order(batch);
  std::iota(order.begin(), order.end(), 0);
  if (!std::is_sorted(c_offsets.begin(), c_offsets.end()) ||
      std::adjacent_find(c_offsets.begin(), c_offsets.end()) != c_offsets.end())
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return c_offsets[x] < c_offsets[y]; });
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < batch; ++i)
    if (i == 0 || c_offsets[order[i]] != c_offsets[order[i - 1]]) starts.push_back(i);
  starts.push_back(batch);
  const int64_t groups = static_cast<int64_t>(starts.size()) - 1;

  auto run_group = [&](int64_t g) {
    for (int64_t p = starts[g]; p < starts[g + 1]; ++p) {
      const int64_t e = order[p];
      gemm(trans_a, trans_b, M, N, K, alpha, A + a_offsets[e], lda, B + b_offsets[e], ldb,
           p == starts[g] ? beta : T(1), C + c_offsets[e], ldc);
    }
  };
  const int64_t work = M * N * K;
  const bool spread = groups >= 2 && work <= kBatchParallelMaxWork &&
                      work * batch > kBatchParallelMinWork && omp_get_max_threads() > 1;
  if (spread) {
    // Inside this region OpenBLAS (OpenMP build) runs each GEMM on the calling thread.
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < groups; ++g) run_group(g);
  } else {
    for (int64_t g = 0; g < groups; ++g) run_group(g);
  }
}
template decltype(gemm_batched<float>) gemm_batched<float>;
template decltype(gemm_batched<double>) gemm_batched<double>;

template <class T>
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                          const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                          int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c,
                          int64_t batch) {
  std::vector<int64_t> ao(batch), bo(batch), co(batch);
  for (int64_t i = 0; i < batch; ++i) {
    ao[i] = i * stride_a;
    bo[i] = i * stride_b;
    co[i] = i * stride_c;
  }
  gemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, ao, B, ldb, bo, beta, C, ldc, co);
}

template decltype(gemm_strided_batched<float>) gemm_strided_batched<float>;
template decltype(gemm_strided_batched<double>) gemm_strided_batched<double>;

// ---- layouts --------------------------------------------------------------------------------

MatrixLayout blas_layout(const Tensor& t) {
  if (t.dim() < 2)
    throw std::invalid_argument(
        fmt::format("blas_layout: expected a tensor with at least 2 axes, got {}", t.describe()));
  const int64_t R = t.size(-2), C = t.size(-1);
  const int64_t sr = t.strides()[t.dim() - 2], sc = t.strides()[t.dim() - 1];
  if (R == 0 || C == 0) return {true, false, std::max<int64_t>(C, 1)};  // nothing is read
  // Row-major: rows of C consecutive elements, `ld` apart. A size-1 axis may have any stride.
  if ((C == 1 || sc == 1) && (R == 1 || sr >= std::max<int64_t>(C, 1)))
    return {true, false, R == 1 ? std::max<int64_t>(C, 1) : sr};
  // The transpose of a row-major [C, R] matrix.
  if ((R == 1 || sr == 1) && (C == 1 || sc >= std::max<int64_t>(R, 1)))
    return {true, true, C == 1 ? std::max<int64_t>(R, 1) : sc};
  return {};
}

int64_t rows_ld(const Tensor& t) {
  const int64_t rank = t.dim();
  if (rank == 0) return -1;
  const int64_t C = t.size(-1);
  if (C != 1 && t.strides()[rank - 1] != 1) return -1;
  // The innermost leading axis of size > 1 sets the row stride; every outer one must step by
  // whole blocks of rows.
  int64_t ld = -1, rows_below = 1;
  for (int64_t k = rank - 2; k >= 0; --k) {
    const int64_t size = t.shape()[k], stride = t.strides()[k];
    if (size == 1) continue;
    if (ld < 0) {
      if (stride < std::max<int64_t>(C, 1)) return -1;
      ld = stride;
    } else if (stride != ld * rows_below) {
      return -1;
    }
    rows_below *= size;
  }
  return ld < 0 ? std::max<int64_t>(C, 1) : ld;
}

// ---- naive matmul reference -----------------------------------------------------------------
// a [.., M, K] @ b [.., K, N]: for every batch index and (i, j), Σ_k in double via at().
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K)
    throw std::invalid_argument(
        fmt::format("ref_matmul: {} @ {}: inner sizes differ", a.describe(), b.describe()));
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ab, bb, "ref_matmul");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  std::vector<double> values;
  const int64_t nb = shape_numel(batch);
  Shape ia(a.dim()), ib(b.dim());
  for (int64_t t = 0; t < nb; ++t) {
    Shape index(batch.size());
    for (int64_t k = static_cast<int64_t>(batch.size()) - 1, rest = t; k >= 0; --k) {
      index[k] = rest % batch[k];
      rest /= batch[k];
    }
    for (size_t k = 0; k < ab.size(); ++k)
      ia[k] = ab[k] == 1 ? 0 : index[k + batch.size() - ab.size()];
    for (size_t k = 0; k < bb.size(); ++k)
      ib[k] = bb[k] == 1 ? 0 : index[k + batch.size() - bb.size()];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          ia[a.dim() - 2] = i, ia[a.dim() - 1] = k;
          ib[b.dim() - 2] = k, ib[b.dim() - 1] = j;
          acc += a.at(ia) * b.at(ib);
        }
        values.push_back(acc);
      }
  }
  return Tensor::from_vector(values, out_shape, a.dtype());
}

// ---- strided copy / add ---------------------------------------------------------------------

namespace {
// The common shape of dst and src with size-1 axes dropped and axes that are contiguous in both
// merged, so a narrow of a contiguous tensor becomes [outer, run] with unit inner strides.
struct Walk {
  Shape shape, sd, ss;
};

Walk merged_walk(const Tensor& dst, const Tensor& src, const char* op) {
  if (dst.shape() != src.shape())
    throw std::invalid_argument(fmt::format("{}: destination {} and source {} differ in shape", op,
                                            dst.describe(), src.describe()));
  if (dst.dtype() != src.dtype())
    throw std::invalid_argument(fmt::format("{}: destination {} and source {} differ in dtype", op,
                                            dst.describe(), src.describe()));
  Walk w;
  if (dst.numel() == 0) return w;  // nothing to walk
  for (int64_t k = 0; k < dst.dim(); ++k) {
    const int64_t size = dst.shape()[k];
    if (size == 1) continue;
    if (dst.strides()[k] == 0)
      throw std::invalid_argument(fmt::format(
          "{}: destination {} repeats elements along axis {} (stride 0)", op, dst.describe(), k));
    if (!w.shape.empty() && w.sd.back() == dst.strides()[k] * size &&
        w.ss.back() == src.strides()[k] * size) {
      w.shape.back() *= size;  // axis k continues the previous one in both tensors
      w.sd.back() = dst.strides()[k];
      w.ss.back() = src.strides()[k];
      continue;
    }
    w.shape.push_back(size);
    w.sd.push_back(dst.strides()[k]);
    w.ss.push_back(src.strides()[k]);
  }
  if (w.shape.empty()) w = {{1}, {1}, {1}};
  return w;
}

// dst[i] = src[i] (Add = false) or dst[i] += src[i] (Add = true) along a merged walk;
// rows (all axes but the last) in parallel, one owner per row. Each thread finds its first row's
// offsets by division and steps the row index like an odometer after that: dividing for every
// row cost more than copying it where rows are short (attention's heads: rows of 32 floats).
template <class T, bool Add>
void strided_apply(T* d, const T* s, const Walk& w, int64_t numel) {
  const int64_t rank = static_cast<int64_t>(w.shape.size());
  const int64_t inner = w.shape[rank - 1];
  const int64_t rows = numel / inner;
  const int64_t id = w.sd[rank - 1], is = w.ss[rank - 1];
#pragma omp parallel if (numel > kParallelGrain)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = rows * me / team, last = rows * (me + 1) / team;
    Shape idx(static_cast<size_t>(rank), 0);
    int64_t od = 0, os = 0;
    for (int64_t k = rank - 2, rest = first; k >= 0; --k) {
      idx[k] = rest % w.shape[k];
      rest /= w.shape[k];
      od += idx[k] * w.sd[k];
      os += idx[k] * w.ss[k];
    }
    for (int64_t row = first; row < last; ++row) {
      T* rd = d + od;
      const T* rs = s + os;
      if (id == 1 && is == 1) {
#pragma omp simd
        for (int64_t j = 0; j < inner; ++j) {
          if constexpr (Add)
            rd[j] += rs[j];
          else
            rd[j] = rs[j];
        }
      } else {
        for (int64_t j = 0; j < inner; ++j) {
          if constexpr (Add)
            rd[j * id] += rs[j * is];
          else
            rd[j * id] = rs[j * is];
        }
      }
      for (int64_t k = rank - 2; k >= 0; --k) {  // the next row's index and offsets
        od += w.sd[k], os += w.ss[k];
        if (++idx[k] < w.shape[k]) break;
        od -= w.shape[k] * w.sd[k], os -= w.shape[k] * w.ss[k];
        idx[k] = 0;
      }
    }
  }
}
}  // namespace

// dst [..] = src [..] (any dtype: elements are moved as 1-, 4- or 8-byte words)
void copy_strided(Tensor& dst, const Tensor& src) {
  Walk w = merged_walk(dst, src, "copy_strided");
  if (dst.numel() == 0) return;
  void* d = static_cast<char*>(dst.storage()->data()) + dst.offset() * dtype_size(dst.dtype());
  const void* s =
      static_cast<const char*>(src.storage()->data()) + src.offset() * dtype_size(src.dtype());
  if (dtype_size(dst.dtype()) == 1)  // bool, uint8
    strided_apply<uint8_t, false>(static_cast<uint8_t*>(d), static_cast<const uint8_t*>(s), w,
                                  dst.numel());
  else if (dtype_size(dst.dtype()) == 4)
    strided_apply<uint32_t, false>(static_cast<uint32_t*>(d), static_cast<const uint32_t*>(s), w,
                                   dst.numel());
  else
    strided_apply<uint64_t, false>(static_cast<uint64_t*>(d), static_cast<const uint64_t*>(s), w,
                                   dst.numel());
}

// dst [..] += src [..] (float32 / float64)
void add_strided(Tensor& dst, const Tensor& src) {
  Walk w = merged_walk(dst, src, "add_strided");
  if (dst.numel() == 0) return;
  dispatch_float(dst.dtype(), "add_strided", [&]<class T>() {
    strided_apply<T, true>(dst.data<T>(), src.data<T>(), w, dst.numel());
  });
}

namespace {
// Calls f(dst offset, src offset) for every index of the common shape, row-major, no merging.
template <class F>
void ref_walk(const Tensor& dst, const Tensor& src, F f) {
  const int64_t n = dst.numel(), rank = dst.dim();
  for (int64_t i = 0; i < n; ++i) {
    int64_t od = 0, os = 0, rest = i;
    for (int64_t k = rank - 1; k >= 0; --k) {
      const int64_t idx = rest % dst.shape()[k];
      rest /= dst.shape()[k];
      od += idx * dst.strides()[k];
      os += idx * src.strides()[k];
    }
    f(od, os);
  }
}
}  // namespace

void ref_copy_strided(Tensor& dst, const Tensor& src) {
  merged_walk(dst, src, "copy_strided");
  dispatch_float(dst.dtype(), "ref_copy_strided", [&]<class T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    ref_walk(dst, src, [&](int64_t od, int64_t os) { d[od] = s[os]; });
  });
}

void ref_add_strided(Tensor& dst, const Tensor& src) {
  merged_walk(dst, src, "add_strided");
  dispatch_float(dst.dtype(), "ref_add_strided", [&]<class T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    ref_walk(dst, src, [&](int64_t od, int64_t os) { d[od] += s[os]; });
  });
}

// ---- column sums ----------------------------------------------------------------------------
// x [rows, cols] (row stride ld) -> out [cols] += Σ_rows x; one thread per block of 64 columns,
// each column summed in row order in double.
template <class T>
void add_column_sums(const T* x, int64_t rows, int64_t cols, int64_t ld, T* out) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * cols > kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kBlock, width = std::min(kBlock, cols - j0);
    double acc[kBlock] = {};
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = x + i * ld + j0;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < width; ++j) out[j0 + j] = static_cast<T>(out[j0 + j] + acc[j]);
  }
}

template <class T>
void ref_add_column_sums(const T* x, int64_t rows, int64_t cols, int64_t ld, T* out) {
  for (int64_t j = 0; j < cols; ++j) {
    double acc = 0;
    for (int64_t i = 0; i < rows; ++i) acc += x[i * ld + j];
    out[j] = static_cast<T>(out[j] + acc);
  }
}
template decltype(add_column_sums<float>) add_column_sums<float>;
template decltype(add_column_sums<double>) add_column_sums<double>;
template decltype(ref_add_column_sums<float>) ref_add_column_sums<float>;
template decltype(ref_add_column_sums<double>) ref_add_column_sums<double>;

}  // namespace dg
