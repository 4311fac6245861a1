// Wrong answer to kaiming_std: gain / fan instead of gain / √fan (the variance's formula used for
// the standard deviation). The weights come out √fan times too small: signals shrink layer by
// layer.
#include "nn/init.h"

namespace dg {

double init::kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  const Fans f = calculate_fans(t);
  const int64_t fan = mode == FanMode::fan_in ? f.fan_in : f.fan_out;
  return calculate_gain(nonlinearity, a) / static_cast<double>(fan);
}

}  // namespace dg
