// The refusals before a walk changes any gradient: backward()'s root that cannot start one
// (check_backward_root), and, in check_walk (called by backward() and grad()), a node an earlier
// backward freed and a tensor a node saved (RecordedNode::saves) that was written in place since.
// Also the check after each node (check_gradient_shapes): every gradient it wrote has its input's
// shape and dtype. The third, create_graph through a backward that does not record, is
// check_differentiable in tape_create_graph.cpp. See tape.h for the contract.
#include <fmt/format.h>

#include "autograd/tape_internal.h"

namespace dg {

RecordedNode& RecordedNode::saves(std::initializer_list<Tensor> tensors) {
  std::vector<uint64_t> versions(node_->inputs.size(), GraphNode::kNotSaved);
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    t.storage()->mark_read_by_backward();
    bool input = false;
    for (size_t k = 0; k < node_->inputs.size(); ++k)
      if (node_->inputs[k].same(t)) versions[k] = t.version(), input = true;
    if (!input) node_->other_saved.emplace_back(detach(t), t.version());
  }
  node_->input_versions = std::move(versions);
  return *this;
}

void check_backward_root(const Tensor& root) {
  if (!root.defined())
    throw std::invalid_argument(
        "backward: the root is an undefined tensor (a default-constructed dg::Tensor, or a "
        "gradient read before any backward reached it)");
  if (!root.requires_grad())
    throw std::invalid_argument(fmt::format(
        "backward: tensor {} does not require grad and has no recorded op: {}", root.describe(),
        root.impl()->made_without_grad
            ? "it was made while grad mode was off (inside a NoGradGuard or a backward), so no "
              "op recorded how it was computed"
            : "the ops that made it had no input requiring grad: either none was set "
              "(set_requires_grad(true) on the parameters or inputs to differentiate) or a step "
              "before it ran while grad mode was off (inside a NoGradGuard) and cut the graph"));
}

void check_walk(const std::vector<Step>& steps, const char* who, bool create_graph) {
  check_not_freed(steps, who);
  check_versions(steps, who);
  if (create_graph) check_differentiable(steps, who);
}

void check_not_freed(const std::vector<Step>& steps, const char* who) {
  for (const Step& s : steps)
    if (s.node->freed)
      throw std::runtime_error(fmt::format(
          "{}: trying to backward through the graph a second time: the node of op '{}' (output "
          "{}) was freed by an earlier backward; pass keep_graph = true to the first backward "
          "to run it again",
          who, s.node->op, s.output.describe()));
}

// PyTorch's "modified by an inplace operation".
void check_versions(const std::vector<Step>& steps, const char* who) {
  auto refuse = [&](const GraphNode& node, const std::string& which, const Tensor& t,
                    uint64_t saved) {
    throw std::runtime_error(fmt::format(
        "{}: a tensor needed for gradient computation was modified by an in-place write: op "
        "'{}' saved its {} {} at version {}, and it is now at version {}. Write it after "
        "backward, or give the op a clone()",
        who, node.op, which, t.describe(), saved, t.version()));
  };
  for (const Step& s : steps) {
    const GraphNode& node = *s.node;
    for (size_t k = 0; k < node.input_versions.size(); ++k) {
      const uint64_t saved = node.input_versions[k];
      if (saved != GraphNode::kNotSaved && node.inputs[k].version() != saved)
        refuse(node, fmt::format("input {}", k), node.inputs[k], saved);
    }
    for (const auto& [t, saved] : node.other_saved)
      if (t.version() != saved)
        refuse(node, t.storage() == s.output.storage() ? "output" : "tensor", t, saved);
  }
}

void check_gradient_shapes(const GraphNode& node) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor& in = node.inputs[k];
    if (!in.defined() || !in.impl()->grad.defined()) continue;
    const Tensor& g = in.impl()->grad;
    if (g.shape() != in.shape() || g.dtype() != in.dtype())
      throw std::logic_error(
          fmt::format("autograd: backward of '{}' produced gradient {} for input {} of {}", node.op,
                      g.describe(), k, in.describe()));
  }
}

}  // namespace dg
