// Which GEMM kernels run, chosen from what the CPU has (tensor/cpu_features.h), and the bf16
// matmul precision.
//
// float32: OpenBLAS. A dynamic OpenBLAS picks its kernels from the CPU models it knows, and an
// older build runs a newer AVX-512 CPU (AMD Zen 4, say) with its Haswell (AVX2) kernels, half the
// core's float32 rate. Before the first GEMM, select_gemm_kernels() re-initialises OpenBLAS with
// its SkylakeX kernels when CPUID reports AVX-512 (F, BW, DQ, VL) saved by the OS and OpenBLAS
// picked an AVX2-or-older core. OPENBLAS_CORETYPE set by the user is left alone. Every GEMM of
// the library goes through it, so every program linking the library gets the choice.
//
// bf16: matmuls with bf16 inputs (rounded to nearest even from float32) and float32
// accumulation and output, through oneDNN's matmul primitive (AMX tiles where the CPU has
// AMX-BF16, else AVX512_BF16 dot products). Only the GEMM inputs are bf16: callers keep float32
// tensors, master weights, gradients, norms, softmax and losses. A CPU with neither instruction
// set is refused (bf16_unsupported_reason), never emulated.
//
// Bits: for one kernel choice results do not depend on the thread count (the output is cut into
// pieces fixed by the shape, each computed on one thread; the bf16 primitives are created for one
// thread, so they never split K). Different choices (Haswell vs SkylakeX kernels, AMX vs
// AVX512_BF16, float32 vs bf16) round differently.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dg {

// ---- the float32 kernel choice ---------------------------------------------------------------
struct GemmKernelChoice {
  std::string blas_core_loaded;  // what OpenBLAS picked by itself ("Haswell")
  std::string blas_core;         // what runs ("SkylakeX")
  std::string reason;            // one line: why (or "OPENBLAS_CORETYPE set by the user")
};
// Makes the choice once (thread-safe) and returns it; the GEMM entry points call it first.
const GemmKernelChoice& select_gemm_kernels();
// Makes the choice again, now, from whatever core OpenBLAS runs at this moment (what
// select_gemm_kernels does once; tests call it after forcing OpenBLAS onto another core). Not
// while GEMMs run on other threads.
GemmKernelChoice choose_blas_core();

// ---- matmul precision ------------------------------------------------------------------------
enum class MatmulPrecision { float32, bf16 };
const char* precision_name(MatmulPrecision p);  // "float32", "bf16"
// Parses "float32" / "bf16"; throws std::invalid_argument otherwise, prefixed by `what` if given.
MatmulPrecision parse_precision(const std::string& text, const std::string& what = "");

// "" when this CPU runs bf16 matmuls, else one line saying why not (names the CPU and what it
// lacks).
std::string bf16_unsupported_reason();
// The one check of a precision against this CPU: nothing for float32 or a CPU with bf16, else
// std::runtime_error "<what> bf16: <why>" (`what` names the flag or setting that asked for it:
// "--precision", "trainer: training.precision"; without it, the reason alone).
void check_precision_supported(MatmulPrecision p, const std::string& what = "");
// The bf16 kernel that runs here, as oneDNN names it ("brg:avx512_core_amx_bf16"), or "" when
// bf16 is unsupported. Creates one small primitive the first time.
std::string bf16_kernel_name();

// The precision every float32 GEMM of the library uses (float64 GEMMs are never affected):
// process-wide, float32 unless set. set_matmul_precision(bf16) throws std::runtime_error with
// bf16_unsupported_reason() on a CPU without bf16 support. Set it between steps, not while GEMMs
// run on other threads. A run applies its precision through a MatmulPrecisionScope held for as
// long as it computes (the Trainer while it steps; a command around what it evaluates), never by
// setting it and leaving it set.
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();
// Sets a precision for a scope and restores the previous one.
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p) : previous_(matmul_precision()) {
    set_matmul_precision(p);
  }
  ~MatmulPrecisionScope() { set_matmul_precision(previous_); }
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision previous_;
};

// ---- bf16 GEMM -------------------------------------------------------------------------------
// float32 → bf16, rounded to nearest, ties to even; NaN stays NaN (quiet), infinities stay.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);
// dst[i] = to_bf16(src[i]) for each of n elements.
void to_bf16(const float* src, int64_t n, uint16_t* dst);

// Rounding spreads over the threads from this many elements: below it, waking a passive second
// thread costs about as much as rounding on one (measured on an AMD EPYC core, in cache: 4.3 µs
// for 2^16 elements, 18 µs for 2^18, 76 µs for 2^20). The micro preset's operands, up to 2^17
// elements, round on one thread, so a micro step at 2 threads wakes no thread to round.
constexpr int64_t kRoundParallelMin = int64_t(1) << 18;

// rows × cols float32 with row stride ld → rows × cols bf16 packed (row stride cols); rows spread
// over the threads from kRoundParallelMin elements, outside a parallel region.
void pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst);

// op(A) and op(B) of a GEMM in bf16: each either already rounded (a16 / b16: a bf16 copy laid out
// as the float32 operand, same leading dimension; tensor/bf16_weights.h) or rounded here and
// packed as stored (A [M, K], or [K, M] when transposed, with leading dimension its row's length;
// likewise B) into buffers that grow as needed and are kept for the next call. spread: rows over
// the threads by pack_bf16's rule; else all on the calling thread. a_ptr, lda, b_ptr, ldb are what
// the bf16 kernel reads.
struct Bf16Operands {
  std::vector<uint16_t> a, b;
  const uint16_t* a_ptr = nullptr;
  const uint16_t* b_ptr = nullptr;
  int64_t lda = 0, ldb = 0;
  void pack(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A,
            int64_t lda_in, const float* B, int64_t ldb_in, bool spread,
            const uint16_t* a16 = nullptr, const uint16_t* b16 = nullptr);
};

// A float32 matrix [rows, cols] (row stride ld) rounded to bf16 once for several GEMMs that read
// it (linear's backward reads dY twice; the fused head reads x once per vocabulary chunk), laid out
// as the float32 one, so `data()` is passed to dg::gemm (kernels_matmul.h) beside the float32
// pointer with the same leading dimension. Rounds only in bf16 matmul precision; otherwise (and
// for float64) data() is nullptr and gemm reads the float32 operand as before. Buffers come from
// a per-thread pool: once warm, a step allocates nothing.
class Bf16Rounded {
 public:
  Bf16Rounded(const float* p, int64_t rows, int64_t cols, int64_t ld);
  Bf16Rounded(const double*, int64_t, int64_t, int64_t) {}
  ~Bf16Rounded();
  Bf16Rounded(const Bf16Rounded&) = delete;
  Bf16Rounded& operator=(const Bf16Rounded&) = delete;
  const uint16_t* data() const { return data_; }

 private:
  std::vector<uint16_t> buffer_;
  const uint16_t* data_ = nullptr;
};

// out [rows, cols] (row stride ld, as p's) = p rounded to bf16 (to_bf16), over the threads from
// kRoundParallelMin elements. What Bf16Rounded does into its pooled buffer, into the caller's.
void round_rows_to_bf16(const float* p, int64_t rows, int64_t cols, int64_t ld, uint16_t* out);

// C [M, N] = alpha · op(A) [M, K] · op(B) [K, N] + beta · C from operands already in bf16 (stored
// as dg::gemm's, leading dimensions in elements), float32 accumulation, on the calling thread.
void gemm_bf16_packed_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                 float alpha, const uint16_t* A, int64_t lda, const uint16_t* B,
                                 int64_t ldb, float beta, float* C, int64_t ldc);

// C [M, N] = alpha · bf16(op(A)) [M, K] · bf16(op(B)) [K, N] + beta · C, row-major, the operands
// as in dg::gemm (kernels_matmul.h), rounded to bf16 on the way in, accumulated in float32, on
// the calling thread. beta = 0 never reads C. Sizes must fit oneDNN's dims (checked by gemm).
void gemm_bf16_one_thread(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                          const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                          float* C, int64_t ldc);
// Reference: the inputs rounded to bf16 exactly as above, products summed in double, then
// C = alpha · sum + beta · C in double. The fast kernel differs from it by float32 accumulation
// only: |fast − ref| ≤ K · 2⁻²³ · Σ_k |bf16(a)·bf16(b)| · |alpha| (plus beta·C's rounding).
void ref_gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                   int64_t ldc);

}  // namespace dg
