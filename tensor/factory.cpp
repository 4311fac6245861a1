// Tensor factories (see factory.h): each fills a fresh contiguous tensor in one serial pass, in
// the order and arithmetic torch's CPU kernels use, so seeded draws match torch's values.
#include "tensor/factory.h"

#include <fmt/format.h>

#include <climits>
#include <cmath>

namespace dg {

namespace {
TorchGenerator& chosen(TorchGenerator* generator) {
  return generator ? *generator : default_generator();
}
}  // namespace

Tensor zeros(const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return Tensor::ones(shape, dtype); }
Tensor full(const Shape& shape, double value, DType dtype) {
  return Tensor::full(shape, value, dtype);
}

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw std::invalid_argument(fmt::format(
        "arange: start {}, end {} and step {} must be finite, step non-zero", start, end, step));
  if ((step > 0 && end < start) || (step < 0 && end > start))
    throw std::invalid_argument(
        fmt::format("arange: step {} does not lead from start {} to end {}", step, start, end));
  const double size = std::ceil((end - start) / step);
  if (size > 1e15) throw std::invalid_argument(fmt::format("arange: {} values is too many", size));
  const int64_t n = static_cast<int64_t>(size);
  if (dtype == DType::b8)
    throw std::invalid_argument(
        "arange: not implemented for bool (as torch); arange an integer "
        "dtype and compare it");
  Tensor t = Tensor::empty({n}, dtype);
  dispatch_any(dtype, [&]<class T>() {
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i)  // torch: a double accumulator
      out[i] = convert_element<T>(start + step * static_cast<double>(i));
  });
  return t;
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  if (steps < 0) throw std::invalid_argument(fmt::format("linspace: steps {} < 0", steps));
  if (dtype == DType::b8) throw std::invalid_argument("linspace: not implemented for bool");
  Tensor t = Tensor::empty({steps}, dtype);
  // torch: step in the dtype (double for integers); the first half from start, the rest from end.
  auto fill = [&]<class T, class Step>(T* out) {
    const T first = static_cast<T>(start), last = static_cast<T>(end);
    if (steps == 1) {
      out[0] = first;
      return;
    }
    const Step step =
        (static_cast<Step>(last) - static_cast<Step>(first)) / static_cast<Step>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      out[i] = i < halfway ? static_cast<T>(first + step * static_cast<Step>(i))
                           : static_cast<T>(last - step * static_cast<Step>(steps - i - 1));
  };
  dispatch_any(dtype, [&]<class T>() {
    using Step = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    if constexpr (!std::is_same_v<T, bool>) fill.template operator()<T, Step>(t.data<T>());
  });
  return t;
}

Tensor rand(const Shape& shape, DType dtype, TorchGenerator* generator) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_float(dtype, "rand",
                 [&]<class T>() { chosen(generator).uniform_(t.data<T>(), t.numel(), 0.0, 1.0); });
  return t;
}

Tensor randn(const Shape& shape, DType dtype, TorchGenerator* generator) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch_float(dtype, "randn",
                 [&]<class T>() { chosen(generator).normal_(t.data<T>(), t.numel(), 0.0, 1.0); });
  return t;
}

// torch's random_from_to: one 32-bit engine output per value when the range fits in 32 bits,
// else one 64-bit (two outputs, the first high); value = low + output % range.
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype,
               TorchGenerator* generator) {
  if (low >= high)
    throw std::invalid_argument(fmt::format("randint: low {} must be below high {}", low, high));
  if (dtype == DType::i32 && (low < INT32_MIN || high - 1 > INT32_MAX))
    throw std::invalid_argument(
        fmt::format("randint: [{}, {}) does not fit int32 values", low, high));
  Tensor t = Tensor::empty(shape, dtype);
  TorchGenerator& gen = chosen(generator);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = range >= (uint64_t{1} << 32) ? gen.next_u64() : gen.next_u32();
    const int64_t value = static_cast<int64_t>(static_cast<uint64_t>(low) + r % range);
    dispatch_any(dtype, [&]<class T>() { t.data<T>()[i] = convert_element<T>(value); });
  }
  return t;
}

}  // namespace dg
