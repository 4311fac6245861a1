// Wrong answer to Schedule::at: the cosine spread over total_steps instead of total_steps −
// warmup_steps, so it has not reached the floor at the last step.
#include <algorithm>
#include <cmath>

#include "train/optim.h"

namespace dg {

double Schedule::at(int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

}  // namespace dg
