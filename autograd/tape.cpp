// The autograd graph: recording, accumulate_grad, the backward walk and grad() (see tape.h for
// the contract). It plants no errors itself: test tools do that through the observer hook.
#include "autograd/tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_sink.h"  // grad_of
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_matmul.h"  // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
std::atomic<int64_t> g_live_nodes{0};
std::atomic<uint64_t> g_next_sequence{0};  // creation numbers: the walk runs them in reverse
std::atomic<uint64_t> g_next_walk{1};      // marks a node as reached by one walk
}  // namespace

// One recorded op. Its output tensor owns it (TensorImpl::grad_fn); it owns its inputs, and so
// the nodes that made them. It never holds its output (that would be a cycle).
struct GraphNode {
  GraphNode(const char* op, std::vector<Tensor> inputs, BackwardFn backward, OpFamily family)
      : op(op),
        inputs(std::move(inputs)),
        backward(std::move(backward)),
        family(family),
        sequence(g_next_sequence.fetch_add(1, std::memory_order_relaxed)) {
    g_live_nodes.fetch_add(1, std::memory_order_relaxed);
  }
  ~GraphNode() { g_live_nodes.fetch_sub(1, std::memory_order_relaxed); }
  GraphNode(const GraphNode&) = delete;
  GraphNode& operator=(const GraphNode&) = delete;

  const char* op;
  std::vector<Tensor> inputs;
  BackwardFn backward;
  OpFamily family;  // the op family its forward was timed under (tensor/profile.h)
  uint64_t sequence;
  uint64_t walk = 0;    // the last walk that reached it
  bool freed = false;   // a backward without keep_graph ran it and released what it held
  bool needed = false;  // grad(): some requested input lies below it
};

namespace {
thread_local bool g_grad_enabled = true;
// The storage of the running node's output gradient while backward() runs that node, when the
// walk drops that gradient afterwards (not retained); null otherwise. See adoptable().
thread_local const Storage* g_node_grad_storage = nullptr;

// Deleting a node releases its inputs, which may delete their nodes, and so on down the graph:
// done recursively, a long chain of ops would overflow the stack. Nodes are deleted from a list
// instead, so the depth stays one node whatever the graph.
thread_local std::vector<GraphNode*> g_pending_delete;
thread_local bool g_deleting = false;
void delete_node(GraphNode* node) {
  g_pending_delete.push_back(node);
  if (g_deleting) return;
  g_deleting = true;
  while (!g_pending_delete.empty()) {
    GraphNode* next = g_pending_delete.back();
    g_pending_delete.pop_back();
    delete next;
  }
  g_deleting = false;
}

// Drops what a node holds for backward (its closure with the buffers it saved, its inputs) once
// it has run; the husk stays so that a second walk can name its op.
void free_node(GraphNode& node) {
  std::vector<Tensor> inputs = std::move(node.inputs);
  BackwardFn backward = std::move(node.backward);
  node.inputs = {};
  node.backward = nullptr;
  node.freed = true;
}

// True when `g` may become input's gradient buffer as it is: right shape and dtype, contiguous,
// and no other live tensor reads or writes its storage later. That holds when g is the only
// handle to its metadata and either the only holder of its storage (a temporary made by the
// backward, or the node's gradient itself) or a view sharing it only with the running node's
// gradient, which the walk drops when the node returns (reshape's backward).
bool adoptable(const Tensor& input, const Tensor& g) {
  if (g.shape() != input.shape() || g.dtype() != input.dtype() || !g.is_contiguous()) return false;
  if (g.handle_count() != 1) return false;
  const long holders = g.storage_holders();
  if (holders == 1) return true;
  return holders == 2 && g_node_grad_storage == g.storage().get();
}

// The test tools' observer of the walk (set_backward_observer); null unless one installed it.
BackwardObserver* g_observer = nullptr;

// A node to run and the tensor it made; the handle keeps the tensor (and so the node and its
// gradient) alive until the node has run, whoever else lets go of it.
struct Step {
  Tensor output;
  GraphNode* node;
};

// Every node the roots depend on, newest first: the reverse of execution order, so gradients
// add up in the order a tape of the whole forward would add them. Linear in the graph's size
// (plus the sort).
std::vector<Step> reachable(const std::vector<Tensor>& roots) {
  const uint64_t walk = g_next_walk.fetch_add(1, std::memory_order_relaxed);
  std::vector<Step> steps;
  std::vector<Tensor> stack;
  auto visit = [&](const Tensor& t) {
    if (!t.defined()) return;
    GraphNode* node = t.impl()->grad_fn.get();
    if (!node || node->walk == walk) return;
    node->walk = walk;
    stack.push_back(t);
  };
  for (const Tensor& root : roots) visit(root);
  while (!stack.empty()) {
    Tensor t = std::move(stack.back());
    stack.pop_back();
    GraphNode* node = t.impl()->grad_fn.get();
    for (const Tensor& in : node->inputs) visit(in);
    steps.push_back(Step{std::move(t), node});
  }
  std::sort(steps.begin(), steps.end(),
            [](const Step& a, const Step& b) { return a.node->sequence > b.node->sequence; });
  return steps;
}

// Refuses to run a node an earlier backward freed, before any gradient changes.
void check_not_freed(const std::vector<Step>& steps, const char* who) {
  for (const Step& s : steps)
    if (s.node->freed)
      throw std::runtime_error(fmt::format(
          "{}: trying to backward through the graph a second time: the node of op '{}' (output "
          "{}) was freed by an earlier backward; pass keep_graph = true to the first backward "
          "to run it again",
          who, s.node->op, s.output.describe()));
}

// Adds `grad_root` (or 1 when undefined: root must hold one element) into root's gradient.
void seed(const Tensor& root, const Tensor& grad_root, const char* who) {
  if (grad_root.defined()) {
    if (grad_root.shape() != root.shape())
      throw std::invalid_argument(fmt::format("{}: gradient {} does not match root {}", who,
                                              grad_root.describe(), root.describe()));
    // A copy: the caller keeps grad_root, so it must never become a buffer the walk adds into.
    accumulate_grad(root, grad_root.clone());
  } else {
    if (root.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "{}: root {} has more than one element; pass its gradient", who, root.describe()));
    accumulate_grad(root, Tensor::ones(root.shape(), root.dtype()));
  }
}

// Runs `steps` (newest first) with grad mode off. Unless keep_graph, each node is freed as soon as
// it has run, so the buffers it saved for backward return to the storage cache while later
// nodes' gradients are made.
void run(std::vector<Step>& steps, bool keep_graph) {
  for (Step& step : steps) {
    GraphNode& node = *step.node;
    TensorImpl* out = step.output.impl();
    if (!out->grad.defined()) {
      if (!keep_graph) free_node(node);
      step.output = Tensor();
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
    if (!keep_graph) free_node(node);
    step.output = Tensor();
  }
}
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
  for (const Tensor& in : inputs)
    if (in.same(output))
      throw std::logic_error(
          fmt::format("autograd: op '{}' returns its input {} itself; record a view or a copy", op,
                      in.describe()));
  TensorImpl* impl = output.impl();
  impl->requires_grad = true;
  impl->is_leaf = false;
  impl->grad_fn = std::shared_ptr<GraphNode>(
      new GraphNode(op, std::move(inputs), std::move(backward), current_op_family()), delete_node);
}

Tensor detach(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor view = Tensor::from_storage(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
  if (!t.name().empty()) view.set_name(t.name());
  return view;
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
  NoGradGuard no_grad;  // ops inside backward closures are not recorded
  std::vector<Step> steps = reachable({root});
  check_not_freed(steps, "backward");
  seed(root, grad_root, "backward");
  run(steps, keep_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool keep_graph,
                         bool allow_unused) {
  if (outputs.empty()) throw std::invalid_argument("grad: no outputs");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument(
        fmt::format("grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i].requires_grad())
      throw std::invalid_argument(
          fmt::format("grad: output {} ({}) does not require grad", i, outputs[i].describe()));
  std::unordered_map<const TensorImpl*, size_t> wanted;  // requested input -> its index
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad())
      throw std::invalid_argument(
          fmt::format("grad: input {} ({}) does not require grad", i, inputs[i].describe()));
    wanted.emplace(inputs[i].impl(), i);
  }
  NoGradGuard no_grad;
  std::vector<Step> steps = reachable(outputs);

  // The nodes with a requested input below them, oldest first (a node's inputs are older than it).
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
  // A freed node has let go of its inputs, so "unused" cannot be told from "below a freed node".
  if (std::find(used.begin(), used.end(), false) != used.end()) check_not_freed(steps, "grad");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!used[i] && !allow_unused)
      throw std::invalid_argument(fmt::format(
          "grad: input {} ({}) is not used by the outputs' graph (pass allow_unused = true to "
          "get an undefined gradient for it)",
          i, inputs[i].describe()));
  std::erase_if(steps, [](const Step& s) { return !s.node->needed; });
  check_not_freed(steps, "grad");

  // Every gradient the walk may write is set aside and put back afterwards.
  struct Saved {
    Tensor tensor, grad;
    bool retain;
  };
  std::vector<Saved> saved;
  std::unordered_set<const TensorImpl*> seen;
  auto set_aside = [&](const Tensor& t) {
    if (!t.defined() || !seen.insert(t.impl()).second) return;
    saved.push_back(Saved{t, t.impl()->grad, t.impl()->retain_grad});
    t.impl()->grad = Tensor();
  };
  for (const Tensor& o : outputs) set_aside(o);
  for (const Step& s : steps)
    for (const Tensor& in : s.node->inputs) set_aside(in);
  for (const Tensor& in : inputs) {
    set_aside(in);
    in.impl()->retain_grad = true;  // a requested non-leaf keeps what reaches it
  }
  std::vector<Tensor> result(inputs.size());
  try {
    for (size_t i = 0; i < outputs.size(); ++i)
      seed(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], "grad");
    run(steps, keep_graph);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!used[i]) continue;
      const Tensor& g = inputs[i].impl()->grad;
      result[i] = g.defined() ? g : Tensor::zeros(inputs[i].shape(), inputs[i].dtype());
    }
  } catch (...) {
    for (Saved& s : saved) s.tensor.impl()->grad = s.grad, s.tensor.impl()->retain_grad = s.retain;
    throw;
  }
  for (Saved& s : saved) s.tensor.impl()->grad = s.grad, s.tensor.impl()->retain_grad = s.retain;
  return result;
}

int64_t live_graph_nodes() { return g_live_nodes.load(std::memory_order_relaxed); }

void set_backward_observer(BackwardObserver* observer) { g_observer = observer; }

}  // namespace dg
