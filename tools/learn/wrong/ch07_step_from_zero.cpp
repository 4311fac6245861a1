// Wrong answer to adam_step_scales: the step counted from 0 (β^(step − 1)): at the first step
// 1 − β1^0 = 0, and the step size is a division by zero.
#include <cmath>

#include "train/optim.h"

namespace dg {

AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  const double t = static_cast<double>(step - 1);
  return AdamStepScales{lr / (1.0 - std::pow(beta1, t)), std::sqrt(1.0 - std::pow(beta2, t))};
}

}  // namespace dg
