// The autograd tape (see tape.h for the contract).
#include "autograd/tape.h"

#include <fmt/format.h>

#include "tensor/kernels_elementwise.h"
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
    throw std::logic_error(fmt::format("autograd: op '{}' has no backward and cannot be recorded", op));
  output.impl()->requires_grad = true;
  output.impl()->is_leaf = false;
  g_tape.push_back(Node{op, std::move(inputs), output, std::move(backward), current_op_family()});
}

Tensor grad_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl->grad.defined()) impl->grad = Tensor::zeros(impl->shape, impl->dtype);
  return impl->grad;
}

void accumulate_grad(const Tensor& input, const Tensor& g) {
  Tensor target = grad_of(input);
  add_reduced_into(target, g);
}

void retain_grad(const Tensor& t) { t.impl()->retain_grad = true; }

void backward(const Tensor& root, const Tensor& grad_root, bool keep_graph) {
  if (!root.requires_grad())
    throw std::invalid_argument(fmt::format(
        "backward: tensor {} does not require grad (no recorded op produced it from a tensor "
        "that requires grad)", root.describe()));
  if (grad_root.defined()) {
    if (grad_root.shape() != root.shape())
      throw std::invalid_argument(fmt::format("backward: gradient {} does not match root {}",
                                              grad_root.describe(), root.describe()));
    accumulate_grad(root, grad_root);
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
    Tensor grad_output = out->grad;
    if (!out->retain_grad) out->grad = Tensor();
    {
      ScopedOpTimer timer(node.family);
      node.backward(grad_output);
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Tensor& in = node.inputs[k];
      if (!in.defined() || !in.impl()->grad.defined()) continue;
      const Tensor& g = in.impl()->grad;
      if (g.shape() != in.shape() || g.dtype() != in.dtype())
        throw std::logic_error(fmt::format(
            "autograd: backward of '{}' produced gradient {} for input {} of {}", node.op,
            g.describe(), k, in.describe()));
    }
    release(node);
  }
  if (!keep_graph) g_tape.clear();
}

void clear_tape() { g_tape.clear(); }
size_t tape_size() { return g_tape.size(); }

}  // namespace dg
