// Wrong answer to optimizer_state: the per-element state (Adam's moments, SGD's momentum) kept,
// the scalars (Adam's step count) left out. A resumed AdamW restarts its bias correction at step
// 1 and its next steps differ from the run that never stopped.
#include "train/checkpoint.h"
#include "train/optim.h"

namespace dg {

OptimizerState optimizer_state(FlatOptimizer& optimizer) {
  return OptimizerState{optimizer.name(), optimizer.element_state(), {}};
}

}  // namespace dg
