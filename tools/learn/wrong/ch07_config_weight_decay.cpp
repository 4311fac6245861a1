// Wrong answer to sgd_update: the weight decay read from config.weight_decay instead
// of the weight_decay argument. A parameter group has its own weight decay (biases and norms
// usually 0, the matrices 0.1), passed as weight_decay; reading the config's decays every group
// alike.
#include "train/optim.h"

namespace dg {
namespace {
template <class T>
void wrong_sgd(T* p, const T* g, T* b, int64_t n, const SGDConfig& c, double lr,
               double weight_decay, bool first) {
  (void)weight_decay;
  const T wd = static_cast<T>(c.weight_decay), mom = static_cast<T>(c.momentum),
          damp = static_cast<T>(1.0 - c.dampening), rate = static_cast<T>(lr);
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
