// An observer of the backward walk, for test tools (tests/support/plant_error.cpp), part of the
// tape's public API: autograd/tape.h includes this header. The code is in
// autograd/tape_observer.cpp; the core's run_step calls it before and after each node.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// before() runs just before a node's backward, after() just after it (before the shape checks),
// each with the node: its op name, inputs, and, for a node recorded by a create_graph walk, the
// op whose backward recorded it (made_by_backward_of; null otherwise). None is set by default;
// unset, it costs one branch per node. Grad mode is off in the observer (even under
// create_graph), so what it computes with ops is not recorded.
struct ObservedNode {
  const char* op;
  const std::vector<Tensor>& inputs;
  const char* made_by_backward_of;
};
struct BackwardObserver {
  virtual ~BackwardObserver() = default;
  virtual void before(const ObservedNode& node) {}
  virtual void after(const ObservedNode& node) {}
};
// Installs `observer` for every later backward() on any thread (nullptr removes it). The caller
// keeps it alive while installed.
void set_backward_observer(BackwardObserver* observer);

}  // namespace dg
