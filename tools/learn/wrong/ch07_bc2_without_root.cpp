// Wrong answer to adam_step_scales: the second correction without its square root, 1 − β2^t
// instead of √(1 − β2^t): √v is divided by a number far smaller than it should be, and the steps
// shrink about thirty-fold at first.
#include <cmath>

#include "train/optim.h"

namespace dg {

AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  const double t = static_cast<double>(step);
  return AdamStepScales{lr / (1.0 - std::pow(beta1, t)), 1.0 - std::pow(beta2, t)};
}

}  // namespace dg
