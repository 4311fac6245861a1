// Wrong answer to optimizer_state: only the first per-element tensor kept (Adam's exp_avg, as if
// every optimiser had one buffer like SGD's momentum). exp_avg_sq is lost: a resumed AdamW
// divides by a fresh second moment.
#include "train/checkpoint.h"
#include "train/optim.h"

namespace dg {

OptimizerState optimizer_state(FlatOptimizer& optimizer) {
  std::vector<NamedTensor> elements = optimizer.element_state();
  if (elements.size() > 1) elements.resize(1);
  return OptimizerState{optimizer.name(), elements, optimizer.scalar_state()};
}

}  // namespace dg
