// torch.optim.SGD (see sgd.h): the checks of its settings, sgd_update, and the class.
#include "train/optim/sgd.h"

#include <fmt/format.h>

#include <cmath>

#include "tensor/exercise.h"

namespace dg {

namespace {
void check_sgd(const SGDConfig& c) {
  detail::check_rate(c.lr, "SGD", "lr");
  detail::check_rate(c.momentum, "SGD", "momentum");
  detail::check_rate(c.weight_decay, "SGD", "weight_decay");
  if (!std::isfinite(c.dampening))
    throw std::invalid_argument(fmt::format("SGD: dampening must be finite, got {}", c.dampening));
  if (c.nesterov && (c.momentum <= 0 || c.dampening != 0))
    throw std::invalid_argument(
        fmt::format("SGD: Nesterov momentum needs momentum > 0 and dampening 0, got momentum {} "
                    "and dampening {}",
                    c.momentum, c.dampening));
}

// torch SGD on one span: d = g + wd·p; buf = d (first) or momentum·buf + (1 − dampening)·d;
// d = d + momentum·buf (Nesterov) or buf; p −= lr·d. p, g, b [n].
template <class T>
void sgd_span(T* __restrict p, const T* __restrict g, T* __restrict b, int64_t n,
              const SGDConfig& c, double lr, double weight_decay, bool first) {
  const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(c.momentum),
          damp = static_cast<T>(1.0 - c.dampening), rate = static_cast<T>(lr);
  const bool nesterov = c.nesterov, plain_damp = c.dampening == 0;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (mom != T(0)) {
      b[i] = first ? d : mom * b[i] + (plain_damp ? d : damp * d);
      d = nesterov ? d + mom * b[i] : b[i];
    }
    p[i] -= rate * d;
  }
}
}  // namespace

DG_EXERCISE void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                            const SGDConfig& config, double lr, double weight_decay, bool first) {
  sgd_span<float>(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}
DG_EXERCISE void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                            const SGDConfig& config, double lr, double weight_decay, bool first) {
  sgd_span<double>(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}

SGD::SGD(FlatParameters& params, const SGDConfig& config)
    : ElementwiseOptimizer((check_sgd(config), params), config.lr, config.weight_decay, "SGD"),
      config_(config) {}

SGD::SGD(std::vector<Tensor> params, const SGDConfig& config)
    : SGD(detail::one_group(std::move(params)), config) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDConfig& config)
    : ElementwiseOptimizer((check_sgd(config), std::move(groups)), config.lr, config.weight_decay,
                           "SGD"),
      config_(config) {}

std::vector<ElementwiseOptimizer::StateTensor> SGD::state_layout() const {
  if (config_.momentum == 0) return {};
  return {{"momentum_buffer", 0.0}};
}

Tensor& SGD::momentum_buffer() {
  static Tensor none;
  return config_.momentum == 0 ? none : flat_state(0);
}

void SGD::update(const UpdateSpan<float>& s) const {
  sgd_update(s.p, s.g, s.state[0], s.n, config_, s.lr, s.weight_decay, s.step == 1);
}
void SGD::update(const UpdateSpan<double>& s) const {
  sgd_update(s.p, s.g, s.state[0], s.n, config_, s.lr, s.weight_decay, s.step == 1);
}

}  // namespace dg
