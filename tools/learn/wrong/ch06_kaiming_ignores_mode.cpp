// Wrong answer to kaiming_std: always fan_in, whatever the mode. kaiming_normal_(mode=fan_out)
// (which keeps the backward's variance, as torchvision's ResNets use) then draws with the
// forward's spread.
#include <cmath>

#include "nn/init.h"

namespace dg {

double init::kaiming_std(const Tensor& t, double a, FanMode, Nonlinearity nonlinearity) {
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(calculate_fans(t).fan_in));
}

}  // namespace dg
