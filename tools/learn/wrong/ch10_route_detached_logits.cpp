// Wrong answer to attnres_route: the weights computed from detach(z). The forward values are
// right, but no gradient reaches the route through z: the route norm and everything before it
// through this path stop learning.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor attnres_route(const Linear& route, const Tensor& z, const std::vector<Tensor>& sources,
                     Tensor& alpha) {
  alpha = softmax(route(detach(z)), -1);
  return depth_mix(sources, alpha);
}

}  // namespace dg
