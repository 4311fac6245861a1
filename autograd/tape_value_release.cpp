// Value release (RecordedNode::releases_values_of, PyTorch's saved-tensor packing for one case):
// a node that keeps its own smaller copy of an input (linear in bf16 precision keeps its input
// rounded to bf16) lets the tape free that input's values once nothing but the node holds them.
// The tape looks for such inputs at each record() and at the start of each backward() and grad()
// (release_unheld_inputs). Also WeakTensor, how such a backward holds the input.
#include <fmt/format.h>

#include "autograd/tape_internal.h"

namespace dg {

// The tape's access to a tensor's shared implementation: how many handles hold it, and a handle
// made from a weak one (WeakTensor). Declared a friend by Tensor.
struct TensorAccess {
  static const std::shared_ptr<TensorImpl>& impl(const Tensor& t) { return t.impl_; }
  static Tensor make(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
};

WeakTensor::WeakTensor(const Tensor& t) : impl_(TensorAccess::impl(t)) {}

Tensor WeakTensor::lock() const {
  std::shared_ptr<TensorImpl> impl = impl_.lock();
  return impl ? TensorAccess::make(std::move(impl)) : Tensor();
}

namespace {
// The inputs whose values their node said it does not read (RecordedNode::releases_values_of),
// not freed yet because something else still held them: looked at again at each record() and
// each backward on this thread. An entry goes once its values are freed or its node is gone.
struct ReleaseCandidate {
  std::weak_ptr<GraphNode> node;
  size_t input;
};
thread_local std::vector<ReleaseCandidate> g_release_candidates;
}  // namespace

RecordedNode& RecordedNode::releases_values_of(size_t input) {
  if (input >= node_->inputs.size())
    throw std::logic_error(fmt::format("autograd: op '{}' releases input {} of {}", node_->op,
                                       input, node_->inputs.size()));
  node_->input_versions[input] = GraphNode::kNotSaved;  // never read: no version to check
  g_release_candidates.push_back({owner_, input});
  return *this;
}

// Frees the values of every candidate input that only its node holds (the tensor handle and its
// storage each have one holder: no caller, no view, no other node).
void release_unheld_inputs() {
  std::vector<ReleaseCandidate>& candidates = g_release_candidates;
  if (candidates.empty()) return;
  size_t kept = 0;
  for (ReleaseCandidate& c : candidates) {
    std::shared_ptr<GraphNode> node = c.node.lock();
    if (!node || node->freed || c.input >= node->inputs.size()) continue;
    const std::shared_ptr<TensorImpl>& impl = TensorAccess::impl(node->inputs[c.input]);
    if (!impl || !impl->storage) continue;
    if (impl.use_count() == 1 && impl->storage.use_count() == 1) {
      impl->storage.reset();
      continue;
    }
    candidates[kept++] = std::move(c);
  }
  candidates.resize(kept);
}

}  // namespace dg
