// The autograd tape: recording, accumulate_grad and the backward walk (see tape.h for the
// contract). It plants no errors itself: test tools do that through the observer hook.
#include "autograd/tape.h"

#include <fmt/format.h>

#include "autograd/grad_sink.h"  // grad_of
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_matmul.h"  // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
struct Node {
  const char* op;
  std::vector<Tensor> inputs;
  Tensor output;
  BackwardFn backward;
  OpFamily family;  // the op family its forward was timed under (tensor/profile.h)
};

thread_local bool g_grad_enabled = true;
thread_local std::vector<Node> g_tape;
// The storage of the running node's output gradient while backward() runs that node, when the
// tape drops that gradient afterwards (not retained); null otherwise. See adoptable().
thread_local const Storage* g_node_grad_storage = nullptr;

// True when `g` may become input's gradient buffer as it is: right shape and dtype, contiguous,
// and no other live tensor reads or writes its storage later. That holds when g is the only
// handle to its metadata and either the only holder of its storage (a temporary made by the
// backward, or the node's gradient itself) or a view sharing it only with the running node's
// gradient, which the tape drops when the node returns (reshape's backward).
bool adoptable(const Tensor& input, const Tensor& g) {
  if (g.shape() != input.shape() || g.dtype() != input.dtype() || !g.is_contiguous()) return false;
  if (g.handle_count() != 1) return false;
  const long holders = g.storage_holders();
  if (holders == 1) return true;
  return holders == 2 && g_node_grad_storage == g.storage().get();
}

// The test tools' observer of the walk (set_backward_observer); null unless one installed it.
BackwardObserver* g_observer = nullptr;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(const char* op, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward) {
  if (!backward)
    throw std::logic_error(
        fmt::format("autograd: op '{}' has no backward and cannot be recorded", op));
  output.impl()->requires_grad = true;
  output.impl()->is_leaf = false;
  g_tape.push_back(Node{op, std::move(inputs), output, std::move(backward), current_op_family()});
}

void accumulate_grad(const Tensor& input, const Tensor& g) {
  TensorImpl* impl = input.impl();
  if (!impl->grad.defined() && adoptable(input, g)) {
    impl->grad = g;
    // The running node's gradient buffer is given away at most once: a later view of it (or the
    // gradient itself) must not become a second input's gradient over the same memory.
    if (g.storage().get() == g_node_grad_storage) g_node_grad_storage = nullptr;
    return;
  }
  Tensor target = grad_of(input);
  if (target.is_contiguous()) {
    add_reduced_into(target, g);
    return;
  }
  // rule 3: a strided gradient installed by set_grad: reduce g to input's shape, then add
  Tensor reduced = Tensor::zeros(input.shape(), input.dtype());
  add_reduced_into(reduced, g);
  add_strided(target, reduced);
}

void retain_grad(const Tensor& t) { t.impl()->retain_grad = true; }

void backward(const Tensor& root, const Tensor& grad_root, bool keep_graph) {
  if (!root.requires_grad())
    throw std::invalid_argument(fmt::format(
        "backward: tensor {} does not require grad (no recorded op produced it from a tensor "
        "that requires grad)",
        root.describe()));
  if (grad_root.defined()) {
    if (grad_root.shape() != root.shape())
      throw std::invalid_argument(fmt::format("backward: gradient {} does not match root {}",
                                              grad_root.describe(), root.describe()));
    // A copy: the caller keeps grad_root, so it must never become a buffer the walk adds into.
    accumulate_grad(root, grad_root.clone());
  } else {
    if (root.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "backward: root {} has more than one element; pass its gradient", root.describe()));
    accumulate_grad(root, Tensor::ones(root.shape(), root.dtype()));
  }
  // Without keep_graph each node is released as soon as the walk has passed it, so the buffers
  // it saved for backward return to the storage cache while later nodes' gradients are made.
  auto release = [keep_graph](Node& node) {
    if (!keep_graph) node = Node{node.op, {}, Tensor(), nullptr, node.family};
  };
  for (size_t i = g_tape.size(); i-- > 0;) {
    Node& node = g_tape[i];
    TensorImpl* out = node.output.impl();
    if (!out || !out->grad.defined()) {
      release(node);
      continue;
    }
    BackwardObserver* observer = g_observer;
    if (observer) [[unlikely]]
      observer->before(node.op, node.inputs);
    Tensor grad_output = out->grad;
    if (!out->retain_grad) out->grad = Tensor();
    {
      ScopedOpTimer timer(node.family);
      g_node_grad_storage = out->retain_grad ? nullptr : grad_output.storage().get();
      try {
        node.backward(grad_output);
      } catch (...) {
        g_node_grad_storage = nullptr;
        throw;
      }
      g_node_grad_storage = nullptr;
    }
    if (observer) [[unlikely]]
      observer->after(node.op, node.inputs);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Tensor& in = node.inputs[k];
      if (!in.defined() || !in.impl()->grad.defined()) continue;
      const Tensor& g = in.impl()->grad;
      if (g.shape() != in.shape() || g.dtype() != in.dtype())
        throw std::logic_error(
            fmt::format("autograd: backward of '{}' produced gradient {} for input {} of {}",
                        node.op, g.describe(), k, in.describe()));
    }
    release(node);
  }
  if (!keep_graph) g_tape.clear();
}

void set_backward_observer(BackwardObserver* observer) { g_observer = observer; }

void clear_tape() { g_tape.clear(); }
size_t tape_size() { return g_tape.size(); }

}  // namespace dg
