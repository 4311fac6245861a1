// The GEMM kernel choice, the matmul precision and the bf16 GEMM (see gemm_kernels.h).
#include "tensor/gemm_kernels.h"

#include <fmt/format.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "tensor/cpu_features.h"
#include "tensor/threads.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

extern "C" {
char* openblas_get_corename(void);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);
}

namespace dg {

// ---- the float32 kernel choice ---------------------------------------------------------------

namespace {
// OpenBLAS cores whose float32 kernels already use AVX-512 (0.3.21 names).
bool is_avx512_core(const std::string& core) {
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

}  // namespace

GemmKernelChoice choose_blas_core() {
  GemmKernelChoice c;
  c.blas_core_loaded = openblas_get_corename();
  c.blas_core = c.blas_core_loaded;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    c.reason = "OPENBLAS_CORETYPE set by the user";
    return c;
  }
  const CpuFeatures& cpu = cpu_features();
  if (!cpu.avx512_core()) {
    c.reason = "OpenBLAS's own pick (the CPU has no AVX-512 saved by the OS)";
    return c;
  }
  if (is_avx512_core(c.blas_core_loaded)) {
    c.reason = "OpenBLAS's own pick, already AVX-512";
    return c;
  }
  // OpenBLAS reads OPENBLAS_CORETYPE when it (re-)initialises its kernel table; the variable is
  // removed again so that child processes make their own choice.
  ::setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  ::unsetenv("OPENBLAS_CORETYPE");
  c.blas_core = openblas_get_corename();
  c.reason = fmt::format("CPUID reports AVX-512 (F, BW, DQ, VL); OpenBLAS had picked {}",
                         c.blas_core_loaded);
  return c;
}

const GemmKernelChoice& select_gemm_kernels() {
  static const GemmKernelChoice choice = choose_blas_core();
  return choice;
}

// ---- matmul precision ------------------------------------------------------------------------

const char* precision_name(MatmulPrecision p) {
  return p == MatmulPrecision::bf16 ? "bf16" : "float32";
}

MatmulPrecision parse_precision(const std::string& text, const std::string& what) {
  if (text == "float32") return MatmulPrecision::float32;
  if (text == "bf16") return MatmulPrecision::bf16;
  const std::string problem = fmt::format("'{}' is not a precision (float32 or bf16)", text);
  throw std::invalid_argument(what.empty() ? problem : what + ": " + problem);
}

std::string bf16_unsupported_reason() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.amx_bf16 || cpu.avx512_bf16) return "";
  return fmt::format("bf16 matmuls need a CPU with AMX-BF16 or AVX512_BF16; this one ({}) has {}",
                     cpu.model.empty() ? cpu.vendor : cpu.model, cpu.summary());
}

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::float32};

// oneDNN sizes its primitives for omp_get_max_threads() when they are created and runs them with
// that many threads. A bf16 GEMM here is always one piece on one thread, so primitives are created
// and run under OneOmpThread (tensor/threads.h).

struct Bf16Key {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  uint32_t alpha_bits, beta_bits;
  bool operator==(const Bf16Key&) const = default;
};
struct Bf16KeyHash {
  size_t operator()(const Bf16Key& k) const {
    size_t h = size_t(k.ta) | size_t(k.tb) << 1;
    for (int64_t v :
         {k.M, k.N, k.K, k.lda, k.ldb, k.ldc, int64_t(k.alpha_bits), int64_t(k.beta_bits)})
      h = h * 1000003u ^ size_t(v);
    return h;
  }
};
struct Bf16Primitive {
  dnnl::matmul matmul;
  dnnl::memory a, b, c;  // handles set per call
  std::string impl;
};

// One engine for the process; a stream, primitive cache and bf16 scratch per thread (the
// primitives and scratch are reused, so steady-state calls allocate nothing).
dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
struct ThreadState {
  dnnl::stream stream{engine()};
  std::unordered_map<Bf16Key, Bf16Primitive, Bf16KeyHash> primitives;
  Bf16Operands operands;
};
ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

Bf16Primitive make_primitive(const Bf16Key& k) {
  using dnnl::memory;
  using dt = memory::data_type;
  // op(A) [M, K] is read from A stored [M, K] (row stride lda) or, transposed, [K, M]; likewise
  // B. C is float32 with row stride ldc.
  memory::desc a_desc({k.M, k.K}, dt::bf16, k.ta ? memory::dims{1, k.lda} : memory::dims{k.lda, 1});
  memory::desc b_desc({k.K, k.N}, dt::bf16, k.tb ? memory::dims{1, k.ldb} : memory::dims{k.ldb, 1});
  memory::desc c_desc({k.M, k.N}, dt::f32, memory::dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  float alpha, beta;
  std::memcpy(&alpha, &k.alpha_bits, 4);
  std::memcpy(&beta, &k.beta_bits, 4);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr, engine());
  Bf16Primitive p{dnnl::matmul(pd), memory(a_desc, engine(), nullptr),
                  memory(b_desc, engine(), nullptr), memory(c_desc, engine(), nullptr),
                  pd.impl_info_str()};
  return p;
}
}  // namespace

void check_precision_supported(MatmulPrecision p, const std::string& what) {
  if (p != MatmulPrecision::bf16) return;
  const std::string why = bf16_unsupported_reason();
  if (why.empty()) return;
  throw std::runtime_error(what.empty() ? why : what + " bf16: " + why);
}

void set_matmul_precision(MatmulPrecision p) {
  check_precision_supported(p);
  g_precision.store(p, std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }

std::string bf16_kernel_name() {
  static const std::string name = [] {
    if (!bf16_unsupported_reason().empty()) return std::string();
    OneOmpThread one;
    return make_primitive({false, true, 64, 64, 64, 64, 64, 64, 0x3f800000u, 0}).impl;
  }();
  return name;
}

// ---- bf16 GEMM -------------------------------------------------------------------------------

// Round to nearest even by adding 0x7FFF plus the lowest kept bit, then truncating; a NaN keeps
// its sign and top payload bits and is made quiet so the rounding cannot turn it into infinity.
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

namespace {
#if defined(__x86_64__)
// The same rounding sixteen floats at a time (AVX-512 F and BW), bit for bit the scalar's.
// GCC 12's own _mm512_cvtepi32_epi16 reads an "undefined" vector it declares, and its
// -Wmaybe-uninitialized reports that inside the intrinsic's header: off for this function only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512bw"))) void to_bf16_avx512(const float* src, int64_t n,
                                                                uint16_t* dst) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x0040);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(src + i);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
}  // namespace

void to_bf16(const float* src, int64_t n, uint16_t* dst) {
#if defined(__x86_64__)
  static const bool wide = cpu_features().avx512f && cpu_features().avx512bw;
  if (wide) return to_bf16_avx512(src, n, dst);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

// Rows are spread over the threads from kRoundParallelMin elements when no parallel region is
// active; how an element rounds does not depend on who rounds it.
void pack_bf16(const float* src, int64_t rows, int64_t cols, int64_t ld, uint16_t* dst) {
  const bool parallel = rows * cols >= kRoundParallelMin && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) to_bf16(src + r * ld, cols, dst + r * cols);
}

void Bf16Operands::pack(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A,
                        int64_t lda_in, const float* B, int64_t ldb_in, bool spread,
                        const uint16_t* a16, const uint16_t* b16) {
  // One operand stored [rows, cols] with row stride ld_in: the copy as it is, or rounded into buf.
  auto one = [&](const float* src, const uint16_t* copy, int64_t rows, int64_t cols, int64_t ld_in,
                 std::vector<uint16_t>& buf, const uint16_t*& ptr, int64_t& ld) {
    if (copy) {
      ptr = copy;
      ld = ld_in;
      return;
    }
    ld = cols;
    if (int64_t(buf.size()) < rows * cols) buf.resize(size_t(rows * cols));
    if (spread)
      pack_bf16(src, rows, cols, ld_in, buf.data());
    else
      for (int64_t r = 0; r < rows; ++r) to_bf16(src + r * ld_in, cols, buf.data() + r * cols);
    ptr = buf.data();
  };
  one(A, a16, ta ? K : M, ta ? M : K, lda_in, a, a_ptr, lda);
  one(B, b16, tb ? N : K, tb ? K : N, ldb_in, b, b_ptr, ldb);
}

namespace {
// Rounded matrices' buffers, per thread: a Bf16Rounded takes one and gives it back.
std::vector<std::vector<uint16_t>>& rounded_pool() {
  thread_local std::vector<std::vector<uint16_t>> pool;
  return pool;
}
}  // namespace

Bf16Rounded::Bf16Rounded(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  if (matmul_precision() != MatmulPrecision::bf16 || rows <= 0 || cols <= 0) return;
  std::vector<std::vector<uint16_t>>& pool = rounded_pool();
  if (!pool.empty()) {
    buffer_ = std::move(pool.back());
    pool.pop_back();
  }
  const int64_t extent = (rows - 1) * ld + cols;  // as the float32 is stored
  if (int64_t(buffer_.size()) < extent) buffer_.resize(size_t(extent));
  round_rows_to_bf16(p, rows, cols, ld, buffer_.data());
  data_ = buffer_.data();
}

void round_rows_to_bf16(const float* p, int64_t rows, int64_t cols, int64_t ld, uint16_t* out) {
  const bool parallel = rows * cols >= kRoundParallelMin && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) to_bf16(p + r * ld, cols, out + r * ld);
}

Bf16Rounded::~Bf16Rounded() {
  if (buffer_.capacity() == 0) return;
  try {
    rounded_pool().push_back(std::move(buffer_));
  } catch (...) {  // the pool could not grow: the buffer is freed instead
  }
}

// C [M, N] = alpha · op(A) · op(B) + beta · C from bf16 operands, on this thread.
void gemm_bf16_packed_one_thread(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                 const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                                 float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0 || K == 0)
    throw std::invalid_argument("gemm (bf16): empty matrices reach the kernel (gemm handles them)");
  ThreadState& ts = thread_state();
  Bf16Key key{ta, tb, M, N, K, lda, ldb, ldc, 0, 0};
  std::memcpy(&key.alpha_bits, &alpha, 4);
  std::memcpy(&key.beta_bits, &beta, 4);
  OneOmpThread one;
  try {
    auto it = ts.primitives.find(key);
    if (it == ts.primitives.end()) it = ts.primitives.emplace(key, make_primitive(key)).first;
    Bf16Primitive& p = it->second;
    p.a.set_data_handle(const_cast<uint16_t*>(A));
    p.b.set_data_handle(const_cast<uint16_t*>(B));
    p.c.set_data_handle(C);
    p.matmul.execute(ts.stream,
                     {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}});
    ts.stream.wait();
  } catch (const dnnl::error& e) {
    throw std::runtime_error(
        fmt::format("gemm (bf16, M={}, N={}, K={}): oneDNN failed: {}", M, N, K, e.what()));
  }
}

// C [M, N] = alpha · bf16(op(A)) [M, K] · bf16(op(B)) [K, N] + beta · C, on this thread.
void gemm_bf16_one_thread(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                          const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                          float* C, int64_t ldc) {
  Bf16Operands& x = thread_state().operands;
  x.pack(ta, tb, M, N, K, A, lda, B, ldb, /*spread=*/false);
  gemm_bf16_packed_one_thread(ta, tb, M, N, K, alpha, x.a_ptr, x.lda, x.b_ptr, x.ldb, beta, C, ldc);
}

// Reference: bf16-rounded inputs, products summed in double.
void ref_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = from_bf16(to_bf16(ta ? A[k * lda + i] : A[i * lda + k]));
        const double b = from_bf16(to_bf16(tb ? B[j * ldb + k] : B[k * ldb + j]));
        acc += a * b;
      }
      double c = double(alpha) * acc;
      if (beta != 0.0f) c += double(beta) * double(C[i * ldc + j]);
      C[i * ldc + j] = float(c);
    }
}

}  // namespace dg
