// Wrong answer to sgd_update: the rate read from config.lr instead of the lr argument.
// A schedule (or set_lr) changes the group's rate and passes it as lr; config.lr is only the rate
// the optimiser started with, so every scheduled step is taken at the starting rate.
#include "train/optim.h"

namespace dg {
namespace {
template <class T>
void wrong_sgd(T* p, const T* g, T* b, int64_t n, const SGDConfig& c, double lr,
               double weight_decay, bool first) {
  (void)lr;
  const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(c.momentum),
          damp = static_cast<T>(1.0 - c.dampening), rate = static_cast<T>(c.lr);
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (mom != T(0)) {
      b[i] = first ? d : mom * b[i] + damp * d;
      d = c.nesterov ? d + mom * b[i] : b[i];
    }
    p[i] -= rate * d;
  }
}
}  // namespace

void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first) {
  wrong_sgd(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}
void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first) {
  wrong_sgd(p, g, momentum_buffer, n, config, lr, weight_decay, first);
}

}  // namespace dg
