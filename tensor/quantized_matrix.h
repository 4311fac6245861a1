// A frozen weight matrix stored in less than float32, and the products that read it: bf16 (2
// bytes a weight) or int8 with one float32 scale per output row (1 byte a weight). The weights are
// dequantised inside the kernels, a panel of rows at a time: no float32 copy of the whole matrix
// is ever made. What a LoRA model's frozen base and a quantized inference model hold instead of a
// float32 Linear weight (nn/quantize.h puts them there). Not here: autograd (quantized_linear,
// autograd/ops.h), training a quantized weight (it gets no gradient), block formats (q8_0, q4).
//
//   QuantizedMatrix q = quantize_matrix(w, QuantFormat::int8);   // w float32 [N, K]
//   quantized_matmul<float>(x, M, K, q, y, N, false);           // y [M, N] = x [M, K] · Ŵᵀ
//
// Formats, for a float32 weight W [N, K]:
//  - bf16: ŵ = bf16(W[o,k]), rounded to nearest, ties to even (dg::to_bf16); read back exactly.
//  - int8 (symmetric, per output row): s_o = fl(max_k |W[o,k]| / 127), q = round-to-nearest-even
//    (fl(W[o,k] / s_o)) clamped to [-127, 127]; a zero row gets s_o = 0 and q = 0. The kernels read
//    ŵ = fl(s_o · q) (the panel path) or multiply a row's sum by s_o (the GEMV).
//
// The error bound (tests/test_quantized.cpp checks it on random and awkward shapes). With
// u = 2^-24, γ_n = n·u / (1 − n·u), y_o = b_o + Σ_k x_k·W[o,k] computed exactly and ŷ_o what
// quantized_matmul returns (float32, float32 matmul precision), for every output element:
//   int8:  |y_o − ŷ_o| ≤ s_o·(1/2 + 2^-16)·Σ_k |x_k|  +  γ_{K+3}·(Σ_k |x_k·ŵ_k| + |b_o|)
//   bf16:  |y_o − ŷ_o| ≤ 2^-9·Σ_k |x_k·W[o,k]|       +  γ_{K+3}·(Σ_k |x_k·ŵ_k| + |b_o|)
// Proof sketch. int8: |fl(w/s) − w/s| ≤ u·127·(1 + 2u), so rounding to an integer and clamping
// leave |w − s·q| ≤ s·(1/2 + 128u); dequantising adds |fl(s·q) − s·q| ≤ 127·u·s, and 255u < 2^-16.
// bf16: rounding to nearest keeps 8 significant bits, |w − ŵ| ≤ 2^-9·|w| (normal w). The second
// term is any order's float32 sum of K products, the bias and the scale's product (FMA or not).
// The first term is the brief's (s_o/2)·Σ|x_k| (int8) and 2^-9 per weight (bf16); for K < 2^14
// the bf16 total is ≤ 2^-8·(Σ_k |x_k·W[o,k]| + |b_o|).
// Float64 activations (gradient checks) read ŵ exactly (every ŵ is a float32) and sum in double.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/kernels_gemv.h"
#include "tensor/tensor.h"

namespace dg {

enum class QuantFormat { bf16, int8 };
const char* quant_format_name(QuantFormat format);  // "bf16", "int8"
// "bf16" or "int8"; throws std::invalid_argument naming the text and the choices otherwise.
QuantFormat parse_quant_format(const std::string& name);

// The packed weights. Tensors (shared handles), so a module can hold them as buffers and a copy of
// the struct is cheap. values: uint8, the int8 weights' bytes [rows, cols] (two's complement), or
// the bf16 weights' bytes [rows, 2·cols] (each little-endian uint16); scales: float32 [rows] for
// int8, undefined for bf16.
struct QuantizedMatrix {
  QuantFormat format = QuantFormat::int8;
  int64_t rows = 0, cols = 0;
  Tensor values, scales;

  const int8_t* int8_rows() const;    // [rows, cols]
  const uint16_t* bf16_rows() const;  // [rows, cols]
  const float* scale_data() const;    // [rows] (int8 only)
  int64_t bytes() const;              // values + scales
  // Throws std::invalid_argument naming `who` when the tensors do not hold the format and shape.
  void check(const char* who) const;
};

// W float32 [N, K] (any strides) -> its quantized form. Throws std::invalid_argument naming the
// tensor when it is not a float32 matrix, or naming the row and column of a weight that is not
// finite.
QuantizedMatrix quantize_matrix(const Tensor& w, QuantFormat format);
// Ŵ as float32 [N, K]: what the kernels multiply by (for tests; the kernels never make it).
Tensor dequantize(const QuantizedMatrix& q);
// out [count, cols] = Ŵ rows row0 .. row0 + count − 1, in T (float or double).
template <class T>
void dequantize_rows(const QuantizedMatrix& q, int64_t row0, int64_t count, T* out);

// ---- products (T = float or double) -------------------------------------------------------------
// Y [M, N] (row stride ldy) = X [M, K] (row stride ldx) · Ŵᵀ, added to Y when accumulate (the
// caller pre-fills Y with a bias or a residual). N = q.rows, K = q.cols.
// Fast path: Ŵ in panels of kQuantPanelRows rows, each dequantised into a per-thread buffer and
// multiplied by one one-thread GEMM (gemm_one_thread) into its own columns of Y; the panels are
// fixed by the shape, so every element is summed in one order at any thread count. M = 1 (float)
// runs quantized_gemv instead.
constexpr int64_t kQuantPanelRows = 64;
template <class T>
void quantized_matmul(const T* X, int64_t M, int64_t ldx, const QuantizedMatrix& q, T* Y,
                      int64_t ldy, bool accumulate);
// dX [M, K] (row stride lddx) = dY [M, N] (row stride lddy) · Ŵ, added to dX when accumulate.
// Fast path: dX in tiles of kQuantTileRows × kQuantTileCols, each owned by one thread, which
// walks Ŵ's rows in panels of kQuantPanelRows (in order) over its columns: one fixed order.
constexpr int64_t kQuantTileRows = 256, kQuantTileCols = 256;
template <class T>
void quantized_matmul_backward_input(const T* dY, int64_t M, int64_t lddy, const QuantizedMatrix& q,
                                     T* dX, int64_t lddx, bool accumulate);

// y [N] = Ŵ · x [K] (+ y when accumulate), reading the int8 or bf16 rows directly (one token of
// decoding). The summation order is kernels_gemv.h's (element k into lane k mod 32 by FMA, then
// the lane tree), then × s_o for int8, then + y: the AVX-512, AVX2 and portable paths give the
// same bits, and each row has one thread.
void quantized_gemv(const QuantizedMatrix& q, const float* x, float* y, bool accumulate,
                    GemvPath path = gemv_best_path());

// The plain references: one dot product per element over ŵ = fl(s_o·q) (or the bf16 value),
// accumulated in double (with Y's old value when accumulate), rounded to T once.
template <class T>
void ref_quantized_matmul(const T* X, int64_t M, int64_t ldx, const QuantizedMatrix& q, T* Y,
                          int64_t ldy, bool accumulate);
template <class T>
void ref_quantized_matmul_backward_input(const T* dY, int64_t M, int64_t lddy,
                                         const QuantizedMatrix& q, T* dX, int64_t lddx,
                                         bool accumulate);

}  // namespace dg
