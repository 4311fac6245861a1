// The quantized matrix (see quantized_matrix.h): its formats, quantising and dequantising, and the
// plain reference products. The fast products are in kernels_quantized.cpp.
#include "tensor/quantized_matrix.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/gemm_kernels.h"

namespace dg {

const char* quant_format_name(QuantFormat format) {
  return format == QuantFormat::bf16 ? "bf16" : "int8";
}

QuantFormat parse_quant_format(const std::string& name) {
  if (name == "bf16") return QuantFormat::bf16;
  if (name == "int8") return QuantFormat::int8;
  throw std::invalid_argument(
      fmt::format("quantized format '{}' is not known (choices: bf16, int8)", name));
}

const int8_t* QuantizedMatrix::int8_rows() const {
  return reinterpret_cast<const int8_t*>(values.data<uint8_t>());
}
const uint16_t* QuantizedMatrix::bf16_rows() const {
  return reinterpret_cast<const uint16_t*>(values.data<uint8_t>());
}
const float* QuantizedMatrix::scale_data() const { return scales.data<float>(); }

int64_t QuantizedMatrix::bytes() const {
  return (values.defined() ? values.numel() : 0) + (scales.defined() ? 4 * scales.numel() : 0);
}

void QuantizedMatrix::check(const char* who) const {
  const int64_t width = format == QuantFormat::bf16 ? 2 * cols : cols;
  const bool values_ok = values.defined() && values.dtype() == DType::u8 &&
                         values.is_contiguous() && values.shape() == Shape{rows, width};
  const bool scales_ok = format == QuantFormat::bf16
                             ? !scales.defined()
                             : scales.defined() && scales.dtype() == DType::f32 &&
                                   scales.is_contiguous() && scales.shape() == Shape{rows};
  if (!values_ok || !scales_ok)
    throw std::invalid_argument(fmt::format(
        "{}: a {} quantized matrix [{}, {}] needs contiguous uint8 values [{}, {}]{}; got values "
        "{} and scales {}",
        who, quant_format_name(format), rows, cols, rows, width,
        format == QuantFormat::int8 ? fmt::format(" and float32 scales [{}]", rows) : "",
        values.defined() ? values.describe() : "undefined",
        scales.defined() ? scales.describe() : "undefined"));
}

namespace {
// Row o of w (float32, contiguous [N, K]) -> its int8 values and scale (see the header).
float quantize_int8_row(const float* w, int64_t K, int8_t* q) {
  float amax = 0.0f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[k]));
  const float scale = amax / 127.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float r = scale > 0.0f ? std::nearbyint(w[k] / scale) : 0.0f;  // ties to even
    q[k] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return scale;
}

void check_finite(const float* w, int64_t N, int64_t K, const Tensor& t) {
  for (int64_t i = 0; i < N * K; ++i)
    if (!std::isfinite(w[i]))
      throw std::invalid_argument(
          fmt::format("quantize_matrix: weight {} has a non-finite value {} at row {}, column {}",
                      t.describe(), w[i], i / K, i % K));
}
}  // namespace

QuantizedMatrix quantize_matrix(const Tensor& w, QuantFormat format) {
  if (!w.defined() || w.dtype() != DType::f32 || w.dim() != 2)
    throw std::invalid_argument(
        fmt::format("quantize_matrix: needs a float32 weight [N, K], got {}",
                    w.defined() ? w.describe() : "an undefined tensor"));
  const Tensor wc = w.is_contiguous() ? w : raw::clone(w);
  QuantizedMatrix q;
  q.format = format;
  q.rows = w.size(0);
  q.cols = w.size(1);
  const float* src = wc.data<float>();
  check_finite(src, q.rows, q.cols, w);
  if (format == QuantFormat::bf16) {
    q.values = Tensor::empty({q.rows, 2 * q.cols}, DType::u8);
    to_bf16(src, q.rows * q.cols, reinterpret_cast<uint16_t*>(q.values.data<uint8_t>()));
    return q;
  }
  q.values = Tensor::empty({q.rows, q.cols}, DType::u8);
  q.scales = Tensor::empty({q.rows}, DType::f32);
  int8_t* values = reinterpret_cast<int8_t*>(q.values.data<uint8_t>());
  float* scales = q.scales.data<float>();
#pragma omp parallel for if (q.rows * q.cols > (int64_t(1) << 18)) schedule(static)
  for (int64_t o = 0; o < q.rows; ++o)
    scales[o] = quantize_int8_row(src + o * q.cols, q.cols, values + o * q.cols);
  return q;
}

template <class T>
void dequantize_rows(const QuantizedMatrix& q, int64_t row0, int64_t count, T* out) {
  const int64_t K = q.cols;
  if (q.format == QuantFormat::bf16) {
    const uint16_t* src = q.bf16_rows() + row0 * K;
    for (int64_t i = 0; i < count * K; ++i) out[i] = static_cast<T>(from_bf16(src[i]));
    return;
  }
  const int8_t* src = q.int8_rows() + row0 * K;
  const float* scales = q.scale_data() + row0;
  for (int64_t r = 0; r < count; ++r) {
    const float s = scales[r];
    T* row = out + r * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) row[k] = static_cast<T>(s * static_cast<float>(src[r * K + k]));
  }
}
template void dequantize_rows<float>(const QuantizedMatrix&, int64_t, int64_t, float*);
template void dequantize_rows<double>(const QuantizedMatrix&, int64_t, int64_t, double*);

Tensor dequantize(const QuantizedMatrix& q) {
  q.check("dequantize");
  Tensor w = Tensor::empty({q.rows, q.cols}, DType::f32);
  dequantize_rows<float>(q, 0, q.rows, w.data<float>());
  return w;
}

// ---- the plain references ---------------------------------------------------------------------

template <class T>
void ref_quantized_matmul(const T* X, int64_t M, int64_t ldx, const QuantizedMatrix& q, T* Y,
                          int64_t ldy, bool accumulate) {
  q.check("ref_quantized_matmul");
  const int64_t N = q.rows, K = q.cols;
  std::vector<float> w(static_cast<size_t>(K));
  for (int64_t o = 0; o < N; ++o) {
    dequantize_rows<float>(q, o, 1, w.data());
    for (int64_t m = 0; m < M; ++m) {
      double sum = accumulate ? static_cast<double>(Y[m * ldy + o]) : 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(X[m * ldx + k]) * w[k];
      Y[m * ldy + o] = static_cast<T>(sum);
    }
  }
}

template <class T>
void ref_quantized_matmul_backward_input(const T* dY, int64_t M, int64_t lddy,
                                         const QuantizedMatrix& q, T* dX, int64_t lddx,
                                         bool accumulate) {
  q.check("ref_quantized_matmul_backward_input");
  const int64_t N = q.rows, K = q.cols;
  std::vector<float> w(static_cast<size_t>(N * K));
  dequantize_rows<float>(q, 0, N, w.data());  // the reference may hold Ŵ whole
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      double sum = accumulate ? static_cast<double>(dX[m * lddx + k]) : 0.0;
      for (int64_t o = 0; o < N; ++o) sum += static_cast<double>(dY[m * lddy + o]) * w[o * K + k];
      dX[m * lddx + k] = static_cast<T>(sum);
    }
}

template void ref_quantized_matmul<float>(const float*, int64_t, int64_t, const QuantizedMatrix&,
                                          float*, int64_t, bool);
template void ref_quantized_matmul<double>(const double*, int64_t, int64_t, const QuantizedMatrix&,
                                           double*, int64_t, bool);
template void ref_quantized_matmul_backward_input<float>(const float*, int64_t, int64_t,
                                                         const QuantizedMatrix&, float*, int64_t,
                                                         bool);
template void ref_quantized_matmul_backward_input<double>(const double*, int64_t, int64_t,
                                                          const QuantizedMatrix&, double*, int64_t,
                                                          bool);

}  // namespace dg
