// Wrong answer to attnres_route: the route's logits used as the weights, without the softmax.
// They are not a distribution over depth (any sign, any sum): the mixture's scale drifts.
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor attnres_route(const Linear& route, const Tensor& z, const std::vector<Tensor>& sources,
                     Tensor& alpha) {
  alpha = route(z);
  return depth_mix(sources, alpha);
}

}  // namespace dg
