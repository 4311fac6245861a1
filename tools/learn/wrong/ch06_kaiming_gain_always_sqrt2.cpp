// Wrong answer to kaiming_std: the gain √2 (relu's) for every nonlinearity. nn.Linear's default
// init (kaiming_uniform_ with a = √5, leaky_relu) and every linear-gain use come out wrong.
#include <cmath>

#include "nn/init.h"

namespace dg {

double init::kaiming_std(const Tensor& t, double, FanMode mode, Nonlinearity) {
  const Fans f = calculate_fans(t);
  const int64_t fan = mode == FanMode::fan_in ? f.fan_in : f.fan_out;
  return std::sqrt(2.0) / std::sqrt(static_cast<double>(fan));
}

}  // namespace dg
