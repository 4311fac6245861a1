// torch.optim.RMSprop (see rmsprop.h): its checks, its update of a span, the class.
#include "train/optim/rmsprop.h"

#include <fmt/format.h>

#include <cmath>

namespace dg {

namespace {
void check_rmsprop(const RMSpropConfig& c) {
  detail::check_rate(c.lr, "RMSprop", "lr");
  detail::check_rate(c.eps, "RMSprop", "eps");
  detail::check_rate(c.weight_decay, "RMSprop", "weight_decay");
  detail::check_rate(c.momentum, "RMSprop", "momentum");
  if (!(c.alpha >= 0 && c.alpha <= 1))
    throw std::invalid_argument(fmt::format("RMSprop: alpha must be in [0, 1], got {}", c.alpha));
}

// torch 1.13 RMSprop (single-tensor path) on one span, in torch's order of operations:
//   g ← g + wd·p;  v ← v·α + (1 − α)·g·g
//   centered: ḡ ← ḡ·α + (1 − α)·g;  d = √(v − ḡ·ḡ) + eps;  otherwise d = √v + eps
//   momentum: b ← b·μ + g/d;  p ← p − lr·b;  otherwise p ← p − lr·(g/d)
// p, g, v [n]; a (centered) and b (momentum) [n] or null. Kept out of line: compiled on its own,
// the loop's floating-point contractions are the same wherever it is called from.
template <class T>
[[gnu::noinline]] void rmsprop_span(T* __restrict p, const T* __restrict g, T* __restrict v,
                                    T* __restrict a, T* __restrict b, int64_t n,
                                    const RMSpropConfig& c, double lr, double weight_decay) {
  const T wd = static_cast<T>(weight_decay), alpha = static_cast<T>(c.alpha),
          one_minus_alpha = static_cast<T>(1.0 - c.alpha), eps = static_cast<T>(c.eps),
          mom = static_cast<T>(c.momentum), rate = static_cast<T>(lr);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = wd != T(0) ? g[i] + wd * p[i] : g[i];
    v[i] = v[i] * alpha + one_minus_alpha * gi * gi;
    T d;
    if (a) {
      a[i] = a[i] * alpha + one_minus_alpha * gi;
      d = std::sqrt(v[i] - a[i] * a[i]) + eps;
    } else {
      d = std::sqrt(v[i]) + eps;
    }
    if (b) {
      b[i] = b[i] * mom + gi / d;
      p[i] = p[i] + (-rate) * b[i];
    } else {
      p[i] = p[i] + (-rate) * (gi / d);
    }
  }
}

// The state in state_layout()'s order: square_avg, then momentum_buffer and grad_avg when used.
template <class T>
void rmsprop_update(const UpdateSpan<T>& s, const RMSpropConfig& c) {
  size_t k = 1;
  T* b = c.momentum > 0 ? s.state[k++] : nullptr;
  T* a = c.centered ? s.state[k++] : nullptr;
  rmsprop_span<T>(s.p, s.g, s.state[0], a, b, s.n, c, s.lr, s.weight_decay);
}
}  // namespace

RMSprop::RMSprop(FlatParameters& params, const RMSpropConfig& config)
    : ElementwiseOptimizer((check_rmsprop(config), params), config.lr, config.weight_decay,
                           "RMSprop"),
      config_(config) {}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropConfig& config)
    : RMSprop(detail::one_group(std::move(params)), config) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& config)
    : ElementwiseOptimizer((check_rmsprop(config), std::move(groups)), config.lr,
                           config.weight_decay, "RMSprop"),
      config_(config) {}

std::vector<ElementwiseOptimizer::StateTensor> RMSprop::state_layout() const {
  std::vector<StateTensor> layout{{"square_avg", 0.0}};
  if (config_.momentum > 0) layout.push_back({"momentum_buffer", 0.0});
  if (config_.centered) layout.push_back({"grad_avg", 0.0});
  return layout;
}
void RMSprop::update(const UpdateSpan<float>& s) const { rmsprop_update(s, config_); }
void RMSprop::update(const UpdateSpan<double>& s) const { rmsprop_update(s, config_); }

}  // namespace dg
