// dg::init: torch.nn.init's in-place initialisers (uniform_, normal_, constant_, zeros_, ones_,
// xavier_*, kaiming_*), drawing from a given TorchGenerator or the default one, so a seeded
// init gives torch's values for float32. They write values without recording on the tape; they
// do not know layers (a layer's default init is in its constructor, nn/layers.cpp).
#pragma once
#include <cstdint>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace dg::init {

enum class FanMode { fan_in, fan_out };
enum class Nonlinearity { linear, sigmoid, tanh, relu, leaky_relu, selu };

// torch.nn.init.calculate_gain: 1, 1, 5/3, √2, √(2/(1+slope²)) (slope defaults to 0.01), 3/4.
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

// torch's _calculate_fan_in_and_fan_out: [out, in, k...] -> in·Πk, out·Πk; needs 2+ dimensions.
struct Fans {
  int64_t fan_in = 0, fan_out = 0;
};
Fans calculate_fans(const Tensor& t);
// The standard deviation the kaiming initialisers draw with: calculate_gain(nonlinearity, a) /
// √fan, fan = fan_in or fan_out of calculate_fans(t) as `mode` says (torch's kaiming_uniform_ then
// draws U(-√3·std, √3·std), kaiming_normal_ N(0, std²)).
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity);

// Each fills the float32 or float64 tensor `t` in place (row-major order) and returns it.
// generator: null draws from dg::default_generator().
Tensor uniform_(const Tensor& t, double a = 0.0, double b = 1.0,
                TorchGenerator* generator = nullptr);
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0,
               TorchGenerator* generator = nullptr);
Tensor constant_(const Tensor& t, double value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);
// U(-a, a), a = gain·√(6/(fan_in+fan_out)); N(0, std²), std = gain·√(2/(fan_in+fan_out)).
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0, TorchGenerator* generator = nullptr);
Tensor xavier_normal_(const Tensor& t, double gain = 1.0, TorchGenerator* generator = nullptr);
// std = gain/√fan with gain = calculate_gain(nonlinearity, a); uniform: U(-√3·std, √3·std).
// Linear's default weight init is kaiming_uniform_(w, √5), i.e. U(-1/√in, 1/√in).
Tensor kaiming_uniform_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                        TorchGenerator* generator = nullptr);
Tensor kaiming_normal_(const Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nonlinearity = Nonlinearity::leaky_relu,
                       TorchGenerator* generator = nullptr);

// While one is alive (on this thread), layer constructors skip their random default init and
// leave parameters at zeros (norm gains at one), drawing nothing: for models that initialise
// every parameter themselves, like torch.nn.utils.skip_init.
class SkipGuard {
 public:
  SkipGuard();
  ~SkipGuard();
  SkipGuard(const SkipGuard&) = delete;
  SkipGuard& operator=(const SkipGuard&) = delete;
};
bool skipping();  // true while a SkipGuard is alive on this thread

}  // namespace dg::init
