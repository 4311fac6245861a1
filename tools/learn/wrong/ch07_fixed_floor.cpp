// Wrong answer to Schedule::at: a fixed floor of 0.1 instead of min_lr_ratio. It agrees with
// the default (0.1), so only a schedule with another floor shows it.
#include <algorithm>
#include <cmath>

#include "train/optim.h"

namespace dg {

double Schedule::at(int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (0.1 + 0.9 * cosine);
}

}  // namespace dg
