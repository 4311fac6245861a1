// grad(): torch.autograd.grad. The gradients of some outputs with respect to chosen inputs, with
// no tensor's .grad changed: the core's walk (tape.cpp) over only the nodes on a path from an
// output to an input, with every gradient it may write set aside and put back. See tape.h for the
// contract.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/tape_internal.h"

namespace dg {

namespace {
// Why an output may not require grad: a gradient made without create_graph has no graph.
constexpr const char* kNotDifferentiableAgain =
    " (if it is, or is computed from, a gradient an earlier grad() or backward() returned, that "
    "call needs create_graph = true for its result to be differentiated again)";

// Refuses outputs and inputs that do not require grad, and a wrong count of grad_outputs.
void check_grad_arguments(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& grad_outputs) {
  if (outputs.empty()) throw std::invalid_argument("grad: no outputs");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument(
        fmt::format("grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i].defined() || !outputs[i].requires_grad())
      throw std::invalid_argument(fmt::format("grad: output {} ({}) does not require grad{}", i,
                                              outputs[i].describe(),
                                              outputs[i].defined() ? kNotDifferentiableAgain : ""));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined() || !inputs[i].requires_grad())
      throw std::invalid_argument(
          fmt::format("grad: input {} ({}) does not require grad", i, inputs[i].describe()));
}

// Marks each node with a requested input below it (GraphNode::needed), oldest first (a node's
// inputs are older than it), and returns which inputs the outputs use.
std::vector<bool> mark_needed_nodes(const std::vector<Step>& steps,
                                    const std::vector<Tensor>& outputs,
                                    const std::vector<Tensor>& inputs) {
  std::unordered_map<const TensorImpl*, size_t> wanted;  // requested input -> its index
  for (size_t i = 0; i < inputs.size(); ++i) wanted.emplace(inputs[i].impl(), i);
  std::vector<bool> used(inputs.size(), false);
  for (const Tensor& o : outputs)
    if (auto it = wanted.find(o.impl()); it != wanted.end()) used[it->second] = true;
  for (auto s = steps.rbegin(); s != steps.rend(); ++s) {
    GraphNode& node = *s->node;
    node.needed = false;
    for (const Tensor& in : node.inputs) {
      if (!in.defined()) continue;
      if (auto it = wanted.find(in.impl()); it != wanted.end()) {
        used[it->second] = true;
        node.needed = true;
      }
      if (const GraphNode* below = in.impl()->grad_fn.get(); below && below->needed)
        node.needed = true;
    }
  }
  return used;
}

// An input the outputs do not use throws, unless allow_unused.
void check_unused_inputs(const std::vector<Step>& steps, const std::vector<Tensor>& inputs,
                         const std::vector<bool>& used, bool allow_unused) {
  // A freed node has let go of its inputs, so "unused" cannot be told from "below a freed node".
  if (std::find(used.begin(), used.end(), false) != used.end()) check_not_freed(steps, "grad");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!used[i] && !allow_unused)
      throw std::invalid_argument(fmt::format(
          "grad: input {} ({}) is not used by the outputs' graph (pass allow_unused = true to "
          "get an undefined gradient for it)",
          i, inputs[i].describe()));
}

// Every gradient the walk may write (the outputs', the steps' inputs', the requested inputs'),
// set aside for the walk and put back when this goes, also when the walk throws. A requested
// non-leaf keeps what reaches it (retain_grad) meanwhile.
class GradientsSetAside {
 public:
  GradientsSetAside(const std::vector<Tensor>& outputs, const std::vector<Step>& steps,
                    const std::vector<Tensor>& inputs) {
    for (const Tensor& o : outputs) set_aside(o);
    for (const Step& s : steps)
      for (const Tensor& in : s.node->inputs) set_aside(in);
    for (const Tensor& in : inputs) {
      set_aside(in);
      in.impl()->retain_grad = true;
    }
  }
  ~GradientsSetAside() {
    for (Saved& s : saved_) s.tensor.impl()->grad = s.grad, s.tensor.impl()->retain_grad = s.retain;
  }
  GradientsSetAside(const GradientsSetAside&) = delete;
  GradientsSetAside& operator=(const GradientsSetAside&) = delete;

 private:
  void set_aside(const Tensor& t) {
    if (!t.defined() || !seen_.insert(t.impl()).second) return;
    saved_.push_back(Saved{t, t.impl()->grad, t.impl()->retain_grad});
    t.impl()->grad = Tensor();
  }
  struct Saved {
    Tensor tensor, grad;
    bool retain;
  };
  std::vector<Saved> saved_;
  std::unordered_set<const TensorImpl*> seen_;
};

// What the walk left in each used input's gradient (zeros when no backward wrote one), after a
// leaf's register_hook hooks (a non-leaf's ran before its node, once).
std::vector<Tensor> gradients_of(const std::vector<Tensor>& inputs, const std::vector<bool>& used) {
  std::vector<Tensor> result(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!used[i]) continue;
    Tensor g = inputs[i].impl()->grad;
    if (!g.defined()) g = Tensor::zeros(inputs[i].shape(), inputs[i].dtype());
    if (has_hooks(inputs[i])) g = hooked_gradient(inputs[i], g);
    result[i] = g;
  }
  return result;
}
}  // namespace

template <int>
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool keep_graph,
                         bool create_graph, bool allow_unused) {
  check_grad_arguments(outputs, inputs, grad_outputs);
  if (create_graph) keep_graph = true;
  release_unheld_inputs();
  NoGradGuard no_grad;
  WalkScope walk(create_graph);
  std::vector<Step> steps = reachable(outputs);
  const std::vector<bool> used = mark_needed_nodes(steps, outputs, inputs);
  check_unused_inputs(steps, inputs, used, allow_unused);
  std::erase_if(steps, [](const Step& s) { return !s.node->needed; });
  check_walk(steps, "grad", create_graph);
  GradientsSetAside set_aside(outputs, steps, inputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    seed(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], "grad");
  run(steps, keep_graph);
  return gradients_of(inputs, used);
}
template std::vector<Tensor> grad<0>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                     const std::vector<Tensor>&, bool, bool, bool);

}  // namespace dg
