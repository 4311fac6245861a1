// The observer of the backward walk, for test tools (set_backward_observer, see tape.h; the only
// user is tests/support/plant_error.cpp). The core's run_step calls observe() before and after
// each node's backward; unset, that costs one branch per node.
#include "autograd/tape_internal.h"

namespace dg {

BackwardObserver* g_observer = nullptr;

void set_backward_observer(BackwardObserver* observer) { g_observer = observer; }

void observe(BackwardObserver* observer, void (BackwardObserver::*when)(const ObservedNode&),
             const ObservedNode& node) {
  if (!observer) [[likely]]
    return;
  GradModeScope off(false);
  (observer->*when)(node);
}

}  // namespace dg
