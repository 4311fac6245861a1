// Wrong answer to pseudo_query_mix: the sources scored as they are, w · S_j, without the RMSNorm.
// The paper normalises the keys so that a source's score does not grow with its magnitude (later
// sources are larger); without it the deepest source wins by size.
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w, const Tensor&, double,
                        Tensor& alpha_out) {
  std::vector<Tensor> logits;
  for (const Tensor& s : sources) logits.push_back(linear(s, w));
  alpha_out = softmax(sources.size() == 1 ? logits[0] : cat(logits, -1), -1);
  return depth_mix(sources, alpha_out);
}

}  // namespace dg
