// Wrong answer to adam_step_scales: β1 and β2 swapped in the corrections, lr / (1 − β2^t) and
// √(1 − β1^t).
#include <cmath>

#include "train/optim.h"

namespace dg {

AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step) {
  const double t = static_cast<double>(step);
  return AdamStepScales{lr / (1.0 - std::pow(beta2, t)), std::sqrt(1.0 - std::pow(beta1, t))};
}

}  // namespace dg
