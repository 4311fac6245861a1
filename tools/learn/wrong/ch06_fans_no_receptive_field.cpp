// Wrong answer to calculate_fans: the fans of a linear weight for every shape (size(1), size(0)),
// the kernel's receptive field forgotten. A conv weight [4, 2, 3, 3] has fan_in 2·3·3 = 18, not 2:
// its initialisation comes out three times too wide.
#include <fmt/format.h>

#include <stdexcept>

#include "nn/init.h"

namespace dg {

init::Fans init::calculate_fans(const Tensor& t) {
  if (t.dim() < 2)
    throw std::invalid_argument(
        fmt::format("init: fans need 2 or more dimensions, got {}", t.describe()));
  return Fans{t.size(1), t.size(0)};
}

}  // namespace dg
