// Wrong answer to pseudo_query_mix: the scores computed with detach(w). The forward values are
// right, but the pseudo-query never gets a gradient: it stays at its zero initialisation and the
// mixture stays the plain mean of the sources.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                        const Tensor& unit_gain, double eps, Tensor& alpha_out) {
  std::vector<Tensor> logits;
  const Tensor query = detach(w);
  for (const Tensor& s : sources) logits.push_back(linear(rms_norm(s, unit_gain, eps), query));
  alpha_out = softmax(sources.size() == 1 ? logits[0] : cat(logits, -1), -1);
  return depth_mix(sources, alpha_out);
}

}  // namespace dg
