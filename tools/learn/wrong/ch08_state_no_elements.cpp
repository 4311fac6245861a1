// Wrong answer to optimizer_state: the name and the step count kept, the per-element tensors
// (moments, momentum buffers) left out. A resumed run starts its moments from zero.
#include "train/checkpoint.h"
#include "train/optim.h"

namespace dg {

OptimizerState optimizer_state(FlatOptimizer& optimizer) {
  return OptimizerState{optimizer.name(), {}, optimizer.scalar_state()};
}

}  // namespace dg
