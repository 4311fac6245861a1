// Wrong answer to attnres_route: the softmax over axis 1 (the tokens) instead of the last axis
// (the sources). Each source's weights then sum to one over the sequence, and a token's weights
// over depth sum to anything.
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor attnres_route(const Linear& route, const Tensor& z, const std::vector<Tensor>& sources,
                     Tensor& alpha) {
  alpha = softmax(route(z), 1);
  return depth_mix(sources, alpha);
}

}  // namespace dg
