// Random sampling with torch 1.13's CPU algorithms on depthgrad's TorchGenerator (tensor/rng.h),
// so that the same seed gives torch's values: randperm (its swap loop) and multinomial (its two
// kernels: argmax / top-k of p / Exp(1) draws, and the cumulative-sum binary search). The Exp(1)
// draws are those of torch's default exponential_ kernel (a torch built without MKL); with MKL,
// torch draws them from MKL's stream instead, and that kernel matches only in distribution. Neither
// records anything: the results are integers. Does not do: torch's CUDA kernels, a `out=`.
// Checks: torch 1.13 goldens (bit for bit), a chi-square check of the frequencies and the
// refusals in tests/test_torch_ops_b.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/rng.h"

namespace dg {

namespace {
// torch's uniform_real_distribution<double>(0, 1): 53 bits of random64().
double uniform53(TorchGenerator& gen) {
  return static_cast<double>(gen.next_u64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

// torch's exponential_distribution<double>(1) on the CPU: −log(1 − u) (at::log1p(−u)).
double exponential1(TorchGenerator& gen) { return -1.0 * std::log1p(-uniform53(gen)); }
}  // namespace

// ---- randperm: r = 0..n−1, then r[i] <-> r[i + random() % (n − i)] for i < n − 1 -----------
Tensor randperm(int64_t n, TorchGenerator* generator, DType dtype) {
  if (n < 0)
    throw std::invalid_argument(fmt::format("randperm: n must be non-negative, got {}", n));
  const int64_t largest = dtype == DType::f32   ? (int64_t{1} << 24)
                          : dtype == DType::f64 ? (int64_t{1} << 53)
                          : dtype == DType::i32 ? int64_t{INT32_MAX} + 1
                                                : INT64_MAX;
  if (n > largest)
    throw std::invalid_argument(
        fmt::format("randperm: n = {} is too large for {}: its values would not be exact", n,
                    dtype_name(dtype)));
  TorchGenerator& gen = generator ? *generator : default_generator();
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), int64_t{0});
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t z = static_cast<int64_t>(gen.next_u32()) % (n - i);
    std::swap(r[i], r[z + i]);
  }
  return Tensor::from_vector(r, {n}, dtype);
}

// ---- multinomial -----------------------------------------------------------------------------
namespace {
// Without replacement, or one sample: the indices of the num_samples largest p / q, q ~ Exp(1)
// drawn for every element in row-major order, largest first (torch's argmax / topk).
template <class T>
void sample_by_exponentials(const T* p, int64_t rows, int64_t C, int64_t k, TorchGenerator& gen,
                            int64_t* out) {
  std::vector<T> r(static_cast<size_t>(rows * C));
  for (int64_t e = 0; e < rows * C; ++e) r[e] = p[e] / static_cast<T>(exponential1(gen));
  std::vector<int64_t> order(static_cast<size_t>(C));
  for (int64_t row = 0; row < rows; ++row) {
    const T* v = r.data() + row * C;
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [v](int64_t a, int64_t b) { return v[a] > v[b]; });
    std::copy(order.begin(), order.begin() + k, out + row * k);
  }
}

// With replacement: per row the cumulative sums (in T) divided by their total, the last set to
// 1, and for each sample the first slot whose cumulative value is not below a 53-bit uniform.
template <class T>
void sample_by_cumulative(const T* p, int64_t rows, int64_t C, int64_t k, TorchGenerator& gen,
                          int64_t* out) {
  std::vector<T> cum(static_cast<size_t>(C));
  for (int64_t row = 0; row < rows; ++row) {
    T total = 0;
    for (int64_t c = 0; c < C; ++c) cum[c] = total += p[row * C + c];
    for (int64_t c = 0; c < C; ++c) cum[c] /= total;
    cum[C - 1] = 1;
    for (int64_t s = 0; s < k; ++s) {
      const double u = uniform53(gen);
      int64_t left = 0, right = C;
      while (right - left > 0) {
        const int64_t mid = left + (right - left) / 2;
        if (cum[mid] < u)
          left = mid + 1;
        else
          right = mid;
      }
      out[row * k + s] = left;
    }
  }
}

// torch's checks of the probabilities, with its messages.
template <class T>
void check_probabilities(const T* p, int64_t rows, int64_t C) {
  for (int64_t row = 0; row < rows; ++row) {
    double total = 0;
    for (int64_t c = 0; c < C; ++c) {
      const T v = p[row * C + c];
      if (!(v >= 0) || std::isinf(v))
        throw std::invalid_argument(fmt::format(
            "multinomial: probability tensor contains either inf, nan or element < 0 (row {}, "
            "category {}: {})",
            row, c, static_cast<double>(v)));
      total += v;
    }
    if (!(total > 0))
      throw std::invalid_argument(fmt::format(
          "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row {}",
          row));
  }
}
}  // namespace

Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement,
                   TorchGenerator* generator) {
  const char* op = "multinomial";
  check_arg(input.defined() && (input.dim() == 1 || input.dim() == 2), op, input,
            "prob_dist of 1 or 2 axes ([C] or [N, C])");
  check_arg(is_floating(input.dtype()), op, input,
            "floating-point probabilities (float32 or float64)");
  const int64_t C = input.size(-1), rows = input.dim() == 2 ? input.size(0) : 1;
  if (num_samples <= 0)
    throw std::invalid_argument(
        fmt::format("multinomial: cannot sample num_samples = {} <= 0 samples", num_samples));
  if (!replacement && num_samples > C)
    throw std::invalid_argument(fmt::format(
        "multinomial: cannot sample num_samples = {} > {} categories without replacement",
        num_samples, C));
  if (C > (int64_t{1} << 24))
    throw std::invalid_argument("multinomial: number of categories cannot exceed 2^24");
  TorchGenerator& gen = generator ? *generator : default_generator();
  const Tensor p = kernel_input(detach(input));
  Tensor out =
      Tensor::empty(input.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples}, DType::i64);
  dispatch_float(input.dtype(), op, [&]<class T>() {
    check_probabilities(p.data<T>(), rows, C);
    if (!replacement || num_samples == 1)
      sample_by_exponentials(p.data<T>(), rows, C, num_samples, gen, out.data<int64_t>());
    else
      sample_by_cumulative(p.data<T>(), rows, C, num_samples, gen, out.data<int64_t>());
  });
  return out;
}

}  // namespace dg
