// Tensor factories as torch's: zeros, ones, full, arange, linspace, rand, randn, randint, each
// with a dtype, the random ones with an optional generator (default: dg::default_generator(),
// re-seeded by dg::manual_seed). They make new contiguous tensors that record nothing on the
// tape; float64 draws use depthgrad's float64 stream (see rng.h), not torch's float64 one.
#pragma once
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace dg {

template <class T>
concept Arithmetic = std::is_arithmetic_v<T>;

Tensor zeros(const Shape& shape, DType dtype = get_default_dtype());
Tensor ones(const Shape& shape, DType dtype = get_default_dtype());
Tensor full(const Shape& shape, double value, DType dtype = get_default_dtype());

// [start, end) in steps of `step`: ceil((end - start) / step) values start + i·step, computed in
// double and rounded to `dtype` (torch's CPU arithmetic). Throws for step 0 or a step pointing
// away from end. Bounds beyond 2^53 lose precision (they pass through double).
Tensor arange(double start, double end, double step, DType dtype);
inline Tensor arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }
// Without a dtype, as torch infers it: int64 when every argument is an integer, else the default
// dtype (float32 unless set_default_dtype changed it).
//   dg::arange(5) -> int64 [0, 1, 2, 3, 4];  dg::arange(0, 1, 0.25) -> float32 [0, .25, .5, .75]
template <Arithmetic E>
Tensor arange(E end) {
  return arange(0.0, static_cast<double>(end), 1.0,
                std::integral<E> ? DType::i64 : get_default_dtype());
}
template <Arithmetic S, Arithmetic E, Arithmetic P = int64_t>
Tensor arange(S start, E end, P step = 1) {
  const bool integral = std::integral<S> && std::integral<E> && std::integral<P>;
  return arange(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step),
                integral ? DType::i64 : get_default_dtype());
}

// `steps` evenly spaced values from start to end inclusive, as torch.linspace: the step is
// computed in the dtype (double for integer dtypes), the first half counted up from start and the
// second half down from end.
Tensor linspace(double start, double end, int64_t steps, DType dtype = get_default_dtype());

// U[0, 1) (torch.rand), N(0, 1) (torch.randn), and integers uniform in [low, high)
// (torch.randint; int64 by default), each drawn from `generator` or the default one.
Tensor rand(const Shape& shape, DType dtype = get_default_dtype(),
            TorchGenerator* generator = nullptr);
Tensor randn(const Shape& shape, DType dtype = get_default_dtype(),
             TorchGenerator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::i64,
               TorchGenerator* generator = nullptr);
inline Tensor randint(int64_t high, const Shape& shape, DType dtype = DType::i64,
                      TorchGenerator* generator = nullptr) {
  return randint(0, high, shape, dtype, generator);
}

}  // namespace dg
