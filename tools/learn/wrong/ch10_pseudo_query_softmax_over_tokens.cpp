// Wrong answer to pseudo_query_mix: the scores concatenated over the sources, then the softmax
// taken over axis 1 (the tokens) instead of the last axis (the sources).
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                        const Tensor& unit_gain, double eps, Tensor& alpha_out) {
  std::vector<Tensor> logits;
  for (const Tensor& s : sources) logits.push_back(linear(rms_norm(s, unit_gain, eps), w));
  alpha_out = softmax(sources.size() == 1 ? logits[0] : cat(logits, -1), 1);
  return depth_mix(sources, alpha_out);
}

}  // namespace dg
