// Wrong answer to calculate_fans: fan_in and fan_out swapped. A weight [out, in] multiplies
// vectors of size in: fan_in is size(1)·receptive field, not size(0)·receptive field. Every
// fan_in initialiser then draws with the wrong spread.
#include <fmt/format.h>

#include <stdexcept>

#include "nn/init.h"

namespace dg {

init::Fans init::calculate_fans(const Tensor& t) {
  if (t.dim() < 2)
    throw std::invalid_argument(
        fmt::format("init: fans need 2 or more dimensions, got {}", t.describe()));
  int64_t receptive_field = 1;
  for (int64_t k = 2; k < t.dim(); ++k) receptive_field *= t.size(k);
  return Fans{t.size(0) * receptive_field, t.size(1) * receptive_field};
}

}  // namespace dg
