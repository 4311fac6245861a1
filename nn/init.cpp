// torch.nn.init's initialisers (see init.h), with torch's formulas evaluated in the same double
// operations, so the bounds and standard deviations are torch's to the last bit.
#include "nn/init.h"

#include <fmt/format.h>

#include <cmath>
#include <type_traits>

#include "tensor/exercise.h"

namespace dg::init {

namespace {
thread_local int skip_depth = 0;

// Draws into t (contiguous: in place; a view: into a contiguous copy, then copied back).
template <class Draw>
Tensor fill_with(const Tensor& t, const char* op, Draw draw) {
  dispatch_float(t.dtype(), op, [&]<class T>() {
    if (t.is_contiguous()) {
      draw(t.template mutable_data<T>(), t.numel());
    } else {
      Tensor dense = Tensor::empty(t.shape(), t.dtype());
      draw(dense.template data<T>(), dense.numel());
      Tensor(t).copy_from(dense);
    }
  });
  return t;
}

TorchGenerator& chosen(TorchGenerator* generator) {
  return generator ? *generator : default_generator();
}
}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::sigmoid:
      return 1.0;
    case Nonlinearity::tanh:
      return 5.0 / 3;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::selu:
      return 3.0 / 4;
  }
  throw std::invalid_argument("calculate_gain: unknown nonlinearity");
}

DG_EXERCISE Fans calculate_fans(const Tensor& t) {
  if (t.dim() < 2)
    throw std::invalid_argument(fmt::format(
        "init: fan in and fan out need a tensor of 2 or more dimensions, got {}", t.describe()));
  int64_t receptive_field = 1;
  for (int64_t k = 2; k < t.dim(); ++k) receptive_field *= t.size(k);
  return Fans{t.size(1) * receptive_field, t.size(0) * receptive_field};
}

DG_EXERCISE double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  const Fans f = calculate_fans(t);
  const int64_t fan = mode == FanMode::fan_in ? f.fan_in : f.fan_out;
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}

Tensor uniform_(const Tensor& t, double a, double b, TorchGenerator* generator) {
  TorchGenerator& gen = chosen(generator);
  return fill_with(t, "init::uniform_", [&](auto* out, int64_t n) { gen.uniform_(out, n, a, b); });
}

Tensor normal_(const Tensor& t, double mean, double std, TorchGenerator* generator) {
  TorchGenerator& gen = chosen(generator);
  return fill_with(t, "init::normal_",
                   [&](auto* out, int64_t n) { gen.normal_(out, n, mean, std); });
}

Tensor constant_(const Tensor& t, double value) {
  return fill_with(t, "init::constant_", [&](auto* out, int64_t n) {
    using T = std::remove_pointer_t<decltype(out)>;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(value);
  });
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0); }

Tensor xavier_uniform_(const Tensor& t, double gain, TorchGenerator* generator) {
  const Fans f = calculate_fans(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  const double a = std::sqrt(3.0) * std;
  return uniform_(t, -a, a, generator);
}

Tensor xavier_normal_(const Tensor& t, double gain, TorchGenerator* generator) {
  const Fans f = calculate_fans(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  return normal_(t, 0.0, std, generator);
}

Tensor kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                        TorchGenerator* generator) {
  if (t.numel() == 0) return t;  // torch: a no-op (with a warning)
  const double std = kaiming_std(t, a, mode, nonlinearity);
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, generator);
}

Tensor kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                       TorchGenerator* generator) {
  if (t.numel() == 0) return t;
  const double std = kaiming_std(t, a, mode, nonlinearity);
  return normal_(t, 0.0, std, generator);
}

SkipGuard::SkipGuard() { ++skip_depth; }
SkipGuard::~SkipGuard() { --skip_depth; }
bool skipping() { return skip_depth > 0; }

}  // namespace dg::init
