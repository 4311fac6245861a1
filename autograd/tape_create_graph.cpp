// Double backward (create_graph): a walk that records the backward it runs, so the gradients it
// leaves have a graph and can be differentiated again. The core (tape.cpp) calls in here at three
// points when the walk records: accumulate_grad becomes accumulate_recorded, a node's backward
// runs through run_recorded_backward, and check_walk refuses a node without a differentiable
// backward (check_differentiable). Also RecordedNode::composed and ::differentiable, with which
// an op offers such a backward. See tape.h for the contract.
#include <fmt/format.h>

#include <string_view>

#include "autograd/ops.h"  // add, sum, reshape, scale: accumulation under create_graph
#include "autograd/tape_internal.h"

namespace dg {

thread_local constinit const char* g_backward_of = nullptr;

RecordedNode& RecordedNode::composed() {
  node_->composed = true;
  return *this;
}

RecordedNode& RecordedNode::differentiable(DifferentiableBackwardFn backward) {
  node_->differentiable = std::move(backward);
  return *this;
}

namespace {
// t summed over the axes along which a tensor of `shape` was broadcast to t's shape (recorded).
Tensor reduce_to_shape(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < t.dim(); ++k)
    if (k < lead || (shape[k - lead] == 1 && t.shape()[k] != 1)) axes.push_back(k);
  return reshape(sum(t, axes, /*keepdim=*/true), shape);
}
}  // namespace

void accumulate_recorded(const Tensor& input, const Tensor& g) {
  GradModeScope on(true);  // also when seeding, outside any node's backward
  TensorImpl* impl = input.impl();
  Tensor r = reduce_to_shape(g, input.shape());
  if (impl->grad.defined()) {
    impl->grad = add(impl->grad, r);
  } else {
    // A gradient that outlives the walk (a leaf's, a retained one) is a copy, never a tensor
    // someone else holds, so that a later in-place accumulation cannot reach it.
    impl->grad = (impl->is_leaf || impl->retain_grad) ? scale(r, 1.0) : r;
  }
}

// The nodes it records note this node's op (made_by_backward_of, for the test tools' observer).
void run_recorded_backward(GraphNode& node, const Tensor& output, const Tensor& grad_output) {
  GradModeScope on(true);
  const char* previous = std::exchange(g_backward_of, node.op);
  try {
    if (node.differentiable)
      node.differentiable(grad_output, output);
    else
      node.backward(grad_output);
  } catch (...) {
    g_backward_of = previous;
    throw;
  }
  g_backward_of = previous;
}

void check_differentiable(const std::vector<Step>& steps, const char* who) {
  for (const Step& s : steps)
    if (!s.node->composed && !s.node->differentiable)
      throw std::runtime_error(fmt::format(
          "{}: create_graph: op '{}' (output {}) has no differentiable backward (its backward "
          "uses fused kernels), so its gradient cannot be differentiated again; compose it from "
          "ops that support create_graph (autograd/README.md lists them){}",
          who, s.node->op, s.output.describe(),
          std::string_view(s.node->op).ends_with("_cell") ||
                  std::string_view(s.node->op).ends_with("_sequence")
              ? "; for an LSTM, GRU or cell module set its gate_math = GateMath::composed "
                "(lstm.gate_math = dg::GateMath::composed; nn/recurrent.h): the same values "
                "through recorded ops"
              : ""));
}

}  // namespace dg
