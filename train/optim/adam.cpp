// Adam and AdamW (see adam.h): adam_step_scales, the one kernel, and the two classes.
#include "train/optim/adam.h"

#include <cmath>

#include "tensor/exercise.h"

namespace dg {

DG_EXERCISE AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  return AdamStepScales{lr / bc1, bc2_sqrt};
}

namespace {
// One span's constants in the parameters' precision: the betas, the bias corrections at the
// span's step (adam_step_scales), and the weight decay as AdamW's factor or Adam's L2 term.
template <class T>
struct AdamConstants {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  T step_size, bc2;
  T decay = T(1);  // AdamW: p ← p·(1 − lr·wd) before the update
  T l2 = T(0);     // Adam: g ← g + l2·p before the moments (when not 0)
};

template <class T>
AdamConstants<T> adam_constants(double beta1, double beta2, double eps, const UpdateSpan<T>& s,
                                bool decoupled) {
  const AdamStepScales scales = adam_step_scales(s.lr, beta1, beta2, s.step);
  AdamConstants<T> c{
      static_cast<T>(beta1),          static_cast<T>(1.0 - beta1), static_cast<T>(beta2),
      static_cast<T>(1.0 - beta2),    static_cast<T>(eps),         static_cast<T>(scales.step_size),
      static_cast<T>(scales.bc2_sqrt)};
  if (decoupled)
    c.decay = static_cast<T>(1.0 - s.lr * s.weight_decay);
  else
    c.l2 = static_cast<T>(s.weight_decay);
  return c;
}

// torch 1.13 AdamW (single-tensor path), per element, in the parameter's precision:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
// Adam (Decay::l2, torch Adam with weight decay): g ← g + wd·p first, and no decay of p; neither
// (Decay::none) without weight decay. p, g, m, v [n]; vectorised, no aliasing between the four.
enum class Decay { decoupled, l2, none };
template <class T, Decay kDecay>
void adam_kernel(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                 int64_t n, const AdamConstants<T>& c) {
  const T decay = c.decay, beta1 = c.beta1, one_minus_beta1 = c.one_minus_beta1, beta2 = c.beta2,
          one_minus_beta2 = c.one_minus_beta2, step_size = c.step_size, bc2 = c.bc2, eps = c.eps,
          l2 = c.l2;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i];
    if constexpr (kDecay == Decay::l2) gi = gi + l2 * p[i];
    T pi = p[i];
    if constexpr (kDecay == Decay::decoupled) pi = pi * decay;
    const T mi = m[i] * beta1 + one_minus_beta1 * gi;
    const T vi = v[i] * beta2 + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / bc2 + eps;
    p[i] = pi + (-step_size) * (mi / denom);
  }
}

// The update of one span: AdamW's decoupled decay, Adam's L2 (when its weight decay is not 0),
// or neither. state[0] is m (exp_avg), state[1] v (exp_avg_sq).
template <class T>
void adam_update(const UpdateSpan<T>& s, double beta1, double beta2, double eps, bool decoupled) {
  const AdamConstants<T> c = adam_constants(beta1, beta2, eps, s, decoupled);
  if (decoupled)
    adam_kernel<T, Decay::decoupled>(s.p, s.g, s.state[0], s.state[1], s.n, c);
  else if (s.weight_decay != 0)
    adam_kernel<T, Decay::l2>(s.p, s.g, s.state[0], s.state[1], s.n, c);
  else
    adam_kernel<T, Decay::none>(s.p, s.g, s.state[0], s.state[1], s.n, c);
}

std::vector<bool> slot_decays(const FlatParameters& params, DecayPolicy policy) {
  if (policy == DecayPolicy::all) return {};
  std::vector<bool> decays;
  for (const auto& slot : params.slots) {
    const std::string& n = slot.name;
    const bool route =
        n.find("_route") != std::string::npos || n.find("_query") != std::string::npos;
    decays.push_back(slot.parameter.dim() >= 2 && !route);
  }
  return decays;
}
}  // namespace

// ---- AdamW ----------------------------------------------------------------------------------

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config)
    : ElementwiseOptimizer(params, config.lr, config.weight_decay, "AdamW"), config_(config) {
  set_slot_decays(slot_decays(params, config.decay));
}

AdamW::AdamW(FlatParameters& params, const AdamWConfig& config, int64_t shard_begin,
             int64_t shard_end)
    : AdamW(params, config) {
  shard(shard_begin, shard_end);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWConfig& config)
    : AdamW(detail::one_group(std::move(params)), config) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWConfig& config)
    : ElementwiseOptimizer(std::move(groups), config.lr, config.weight_decay, "AdamW"),
      config_(config) {}

std::vector<ElementwiseOptimizer::StateTensor> AdamW::state_layout() const {
  return {{"exp_avg", 0.0}, {"exp_avg_sq", 0.0}};
}
void AdamW::update(const UpdateSpan<float>& s) const {
  adam_update(s, config_.beta1, config_.beta2, config_.eps, true);
}
void AdamW::update(const UpdateSpan<double>& s) const {
  adam_update(s, config_.beta1, config_.beta2, config_.eps, true);
}

// ---- Adam -----------------------------------------------------------------------------------

Adam::Adam(FlatParameters& params, const AdamConfig& config)
    : ElementwiseOptimizer(params, config.lr, config.weight_decay, "Adam"), config_(config) {}

Adam::Adam(std::vector<Tensor> params, const AdamConfig& config)
    : Adam(detail::one_group(std::move(params)), config) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamConfig& config)
    : ElementwiseOptimizer(std::move(groups), config.lr, config.weight_decay, "Adam"),
      config_(config) {}

std::vector<ElementwiseOptimizer::StateTensor> Adam::state_layout() const {
  return {{"exp_avg", 0.0}, {"exp_avg_sq", 0.0}};
}
void Adam::update(const UpdateSpan<float>& s) const {
  adam_update(s, config_.beta1, config_.beta2, config_.eps, false);
}
void Adam::update(const UpdateSpan<double>& s) const {
  adam_update(s, config_.beta1, config_.beta2, config_.eps, false);
}

}  // namespace dg
