// torch.optim.Adagrad (see adagrad.h): its checks, its update of a span, the class.
#include "train/optim/adagrad.h"

#include <cmath>

namespace dg {

namespace {
void check_adagrad(const AdagradConfig& c) {
  detail::check_rate(c.lr, "Adagrad", "lr");
  detail::check_rate(c.lr_decay, "Adagrad", "lr_decay");
  detail::check_rate(c.weight_decay, "Adagrad", "weight_decay");
  detail::check_rate(c.initial_accumulator_value, "Adagrad", "initial_accumulator_value");
  detail::check_rate(c.eps, "Adagrad", "eps");
}

// torch 1.13 Adagrad (single-tensor path, dense) on one span, in torch's order of operations:
//   g ← g + wd·p;  s ← s + g·g;  p ← p − clr·(g / (√s + eps))
// p, g, s [n]; clr the step's decayed rate.
template <class T>
void adagrad_span(T* __restrict p, const T* __restrict g, T* __restrict s, int64_t n,
                  double weight_decay, double clr, double epsilon) {
  const T wd = static_cast<T>(weight_decay), rate = static_cast<T>(clr),
          eps = static_cast<T>(epsilon);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = wd != T(0) ? g[i] + wd * p[i] : g[i];
    s[i] = s[i] + gi * gi;
    p[i] = p[i] + (-rate) * (gi / (std::sqrt(s[i]) + eps));
  }
}

template <class T>
void adagrad_update(const UpdateSpan<T>& s, const AdagradConfig& c) {
  // torch: clr = lr / (1 + (step − 1)·lr_decay), the step counted from 1 after the increment.
  const double clr = s.lr / (1 + static_cast<double>(s.step - 1) * c.lr_decay);
  adagrad_span<T>(s.p, s.g, s.state[0], s.n, s.weight_decay, clr, c.eps);
}
}  // namespace

Adagrad::Adagrad(FlatParameters& params, const AdagradConfig& config)
    : ElementwiseOptimizer((check_adagrad(config), params), config.lr, config.weight_decay,
                           "Adagrad"),
      config_(config) {}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradConfig& config)
    : Adagrad(detail::one_group(std::move(params)), config) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& config)
    : ElementwiseOptimizer((check_adagrad(config), std::move(groups)), config.lr,
                           config.weight_decay, "Adagrad"),
      config_(config) {}

std::vector<ElementwiseOptimizer::StateTensor> Adagrad::state_layout() const {
  return {{"sum", config_.initial_accumulator_value}};
}
void Adagrad::update(const UpdateSpan<float>& s) const { adagrad_update(s, config_); }
void Adagrad::update(const UpdateSpan<double>& s) const { adagrad_update(s, config_); }

}  // namespace dg
