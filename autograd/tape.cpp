// The autograd graph: recording, accumulate_grad, the backward walk and grad() (see tape.h for
// the contract). backward_order is an exercise of the learner's path's chapter 2
// (autograd/learn-02-graph.md): a weak definition (tensor/exercise.h) a learner's may replace. It
// plants no errors itself: test tools do that through the observer hook.
#include "autograd/tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_sink.h"  // grad_of
#include "autograd/ops.h"        // add, sum, reshape, scale: accumulation under create_graph
#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_matmul.h"  // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
std::atomic<int64_t> g_live_nodes{0};
std::atomic<uint64_t> g_next_sequence{0};  // creation numbers: the walk runs them in reverse
std::atomic<uint64_t> g_next_walk{1};
// Post-accumulate hooks registered and not removed, over all tensors: while none is, a backward
// does not look for leaves that have them.
std::atomic<int64_t> g_post_accumulate_hooks{0};  // marks a node as reached by one walk
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
  bool freed = false;   // a backward without keep_graph ran it and released what it held
  bool needed = false;  // grad(): some requested input lies below it

  // Version check: input k's version when recorded (kNotSaved: the backward does not read it),
  // and other tensors the backward reads (its output) with theirs.
  static constexpr uint64_t kNotSaved = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> input_versions;
  std::vector<std::pair<Tensor, uint64_t>> other_saved;

  // create_graph: a composed backward runs itself with grad mode on; else `differentiable` runs.
  bool composed = false;
  DifferentiableBackwardFn differentiable;
  const char* made_by_backward_of =
      nullptr;  // recorded by a create_graph walk inside this op's backward
  std::unique_ptr<std::string> made_at;  // anomaly mode: where the node was recorded
};

struct GradHooks {
  std::vector<std::pair<uint64_t, std::function<Tensor(const Tensor&)>>> hooks;
  // register_post_accumulate_grad_hook's: run on a leaf once its gradient is final in a walk
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> post_accumulate;
  uint64_t next_id = 0;
  uint64_t applied_in_walk = 0;  // the walk that last ran them (they run once per walk)
};

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

// Frees the values of every candidate input that only its node holds (the tensor handle and its
// storage each have one holder: no caller, no view, no other node).
void release_unheld_inputs() {
  std::vector<ReleaseCandidate>& candidates = g_release_candidates;
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
}  // namespace

namespace {
thread_local bool g_create_graph = false;          // the running walk records its backward
thread_local const char* g_backward_of = nullptr;  // the op whose backward a create walk runs
thread_local uint64_t g_current_walk = 0;          // the running walk (hooks run once per walk)
thread_local bool g_anomaly = false;
struct ScopeEntry {
  const void* owner;
  std::string (*describe)(const void*);
};
// CreationScope's stack: pushed by every module forward (two pointers), read only in anomaly mode.
thread_local std::vector<ScopeEntry> g_scopes;

// Sets grad mode for a scope (the walk turns it on around a create_graph backward).
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(detail::grad_mode) { detail::grad_mode = on; }
  ~GradModeScope() { detail::grad_mode = previous_; }

 private:
  bool previous_;
};
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

// Every node the roots depend on, newest first (backward_order): the steps backward() and grad()
// run.
std::vector<Step> reachable(const std::vector<Tensor>& roots) {
  std::vector<Tensor> order = backward_order(roots);
  std::vector<Step> steps;
  steps.reserve(order.size());
  for (Tensor& t : order) {
    GraphNode* node = t.defined() ? t.impl()->grad_fn.get() : nullptr;
    if (!node)  // only a rewritten backward_order gets here
      throw std::logic_error(fmt::format(
          "backward: backward_order listed {}, which no recorded op made: it has no node to run",
          t.defined() ? t.describe() : std::string("an undefined tensor")));
    steps.push_back(Step{std::move(t), node});
  }
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

// Refuses a walk that would read a saved tensor written in place since its node was recorded
// (PyTorch's "modified by an inplace operation"), before any gradient changes.
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

// Under create_graph every node must have a backward that records: refuses, naming the op.
void check_differentiable(const std::vector<Step>& steps, const char* who) {
  for (const Step& s : steps)
    if (!s.node->composed && !s.node->differentiable)
      throw std::runtime_error(fmt::format(
          "{}: create_graph: op '{}' (output {}) has no differentiable backward (its backward "
          "uses fused kernels), so its gradient cannot be differentiated again; compose it from "
          "ops that support create_graph (autograd/README.md lists them){}",
          who, s.node->op, s.output.describe(),
          std::string_view(s.node->op) == "lstm_cell" || std::string_view(s.node->op) == "gru_cell"
              ? "; for an LSTM, GRU or cell module set its gate_math = GateMath::composed "
                "(lstm.gate_math = dg::GateMath::composed; nn/recurrent.h): the same values "
                "through recorded ops"
              : ""));
}

// ---- hooks -----------------------------------------------------------------------------------

// g after every hook registered on `t` (each on the previous one's result); once per walk.
Tensor apply_hooks(const Tensor& t, Tensor g) {
  GradHooks& h = *t.impl()->hooks;
  if (h.applied_in_walk == g_current_walk) return g;
  h.applied_in_walk = g_current_walk;
  auto hooks = h.hooks;  // a hook may remove itself (or another) while they run
  for (auto& [id, hook] : hooks) {
    Tensor r = hook(g);
    if (!r.defined()) continue;
    if (r.shape() != t.shape() || r.dtype() != t.dtype())
      throw std::invalid_argument(
          fmt::format("hook on tensor {}: it returned gradient {}, which does not match the tensor",
                      t.describe(), r.describe()));
    g = r;
  }
  return g;
}

bool has_hooks(const Tensor& t) {
  return t.defined() && t.impl()->hooks && !t.impl()->hooks->hooks.empty();
}

// ---- accumulation under create_graph ----------------------------------------------------------

// t summed over the axes along which a tensor of `shape` was broadcast to t's shape (recorded).
Tensor reduce_to_shape(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < t.dim(); ++k)
    if (k < lead || (shape[k - lead] == 1 && t.shape()[k] != 1)) axes.push_back(k);
  return reshape(sum(t, axes, /*keepdim=*/true), shape);
}

// accumulate_grad under create_graph: the gradient becomes a recorded sum (never written in place).
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

// ---- the walk ------------------------------------------------------------------------------

// Adds `grad_root` (or 1 when undefined: root must hold one element) into root's gradient.
void seed(const Tensor& root, const Tensor& grad_root, const char* who) {
  if (grad_root.defined()) {
    if (grad_root.shape() != root.shape())
      throw std::invalid_argument(fmt::format("{}: gradient {} does not match root {}", who,
                                              grad_root.describe(), root.describe()));
    // A copy: the caller keeps grad_root, so it must never become a buffer the walk adds into.
    accumulate_grad(root, g_create_graph ? grad_root : raw::clone(grad_root));
  } else {
    if (root.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "{}: root {} has more than one element; pass its gradient", who, root.describe()));
    accumulate_grad(root, Tensor::ones(root.shape(), root.dtype()));
  }
}

// The first non-finite element of t, or -1 (anomaly mode's check).
int64_t first_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return -1;
  const std::vector<double> v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return static_cast<int64_t>(i);
  return -1;
}

// Anomaly mode: throws when the node just run left a non-finite value in an input's gradient.
void check_finite(const GraphNode& node, const Tensor& output) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor& in = node.inputs[k];
    if (!in.defined() || !in.impl()->grad.defined()) continue;
    const Tensor& g = in.impl()->grad;
    const int64_t at = first_non_finite(g);
    if (at < 0) continue;
    throw std::runtime_error(fmt::format(
        "anomaly: the backward of op '{}' returned a non-finite value ({}) at element {} of the "
        "gradient of its input {} ({}); the op was recorded {}; its output was {}",
        node.op, g.to_vector()[static_cast<size_t>(at)], at, k, in.describe(),
        node.made_at ? *node.made_at : std::string("outside anomaly mode (where is unknown)"),
        output.describe()));
  }
}

// Runs one node's backward: the fast one, or under create_graph the recorded one.
void run_node(GraphNode& node, const Tensor& output, const Tensor& grad_output) {
  if (!g_create_graph) {
    node.backward(grad_output);
    return;
  }
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

// Runs one node's backward (grad mode as the walk sets it) and frees it unless keep_graph.
void run_step(Step& step, bool keep_graph) {
  GraphNode& node = *step.node;
  TensorImpl* out = step.output.impl();
  if (!out->grad.defined()) {
    if (!keep_graph) free_node(node);
    step.output = Tensor();
    return;
  }
  if (out->hooks) [[unlikely]] {
    GradModeScope mode(g_create_graph);
    out->grad = apply_hooks(step.output, out->grad);
  }
  BackwardObserver* observer = g_observer;
  const ObservedNode observed{node.op, node.inputs, node.made_by_backward_of};
  if (observer) [[unlikely]] {
    GradModeScope off(false);
    observer->before(observed);
  }
  Tensor grad_output = out->grad;
  if (!out->retain_grad) out->grad = Tensor();
  {
    ScopedOpTimer timer(node.family);
    g_node_grad_storage =
        out->retain_grad || g_create_graph ? nullptr : grad_output.storage().get();
    try {
      run_node(node, step.output, grad_output);
    } catch (...) {
      g_node_grad_storage = nullptr;
      throw;
    }
    g_node_grad_storage = nullptr;
  }
  if (observer) [[unlikely]] {
    GradModeScope off(false);
    observer->after(observed);
  }
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor& in = node.inputs[k];
    if (!in.defined() || !in.impl()->grad.defined()) continue;
    const Tensor& g = in.impl()->grad;
    if (g.shape() != in.shape() || g.dtype() != in.dtype())
      throw std::logic_error(
          fmt::format("autograd: backward of '{}' produced gradient {} for input {} of {}", node.op,
                      g.describe(), k, in.describe()));
  }
  if (g_anomaly) [[unlikely]]
    check_finite(node, step.output);
  if (!keep_graph) free_node(node);
  step.output = Tensor();
}

// A leaf whose gradient no node after `after_step` adds to, with the post-accumulate hooks it
// holds (register_post_accumulate_grad_hook): they run once that step has run.
struct FinishedLeaf {
  size_t after_step;
  Tensor leaf;
};

void run_post_accumulate_hooks(const Tensor& leaf) {
  GradModeScope off(false);
  auto hooks = leaf.impl()->hooks->post_accumulate;  // a hook may remove itself while they run
  for (auto& [id, hook] : hooks) hook(leaf);
}

// The leaves with post-accumulate hooks that a backward over `steps` (from `root`) reaches, in
// the order their gradients become final: after the oldest node that takes each as input, or,
// for the root and a leaf whose gradient is set aside for register_hook's hooks
// (set_aside_hooked_leaves), after the whole walk (steps.size()).
std::vector<FinishedLeaf> leaves_with_post_accumulate_hooks(const std::vector<Step>& steps,
                                                            const Tensor& root) {
  std::vector<FinishedLeaf> leaves;
  if (g_post_accumulate_hooks.load(std::memory_order_relaxed) == 0) return leaves;
  std::unordered_map<const TensorImpl*, size_t> index;  // leaf -> its entry in `leaves`
  auto note = [&](const Tensor& t, size_t after) {
    if (!t.defined() || t.impl()->grad_fn || !t.impl()->hooks) return;
    const GradHooks& h = *t.impl()->hooks;
    if (h.post_accumulate.empty()) return;
    if (!h.hooks.empty()) after = steps.size();
    auto [it, added] = index.emplace(t.impl(), leaves.size());
    if (added)
      leaves.push_back(FinishedLeaf{after, t});
    else
      leaves[it->second].after_step = std::max(leaves[it->second].after_step, after);
  };
  for (size_t i = 0; i < steps.size(); ++i)
    for (const Tensor& in : steps[i].node->inputs) note(in, i);
  note(root, steps.size());
  std::stable_sort(leaves.begin(), leaves.end(), [](const FinishedLeaf& a, const FinishedLeaf& b) {
    return a.after_step < b.after_step;
  });
  return leaves;
}

// Runs `steps` (newest first) with grad mode off (on inside a create_graph backward), and the
// post-accumulate hooks of `finished` after the step each waits for (those waiting for the end
// are left to the caller). Unless keep_graph, each node is freed as soon as it has run, so the
// buffers it saved for backward return to the storage cache while later nodes' gradients are made.
void run(std::vector<Step>& steps, bool keep_graph,
         const std::vector<FinishedLeaf>& finished = {}) {
  size_t next_finished = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    run_step(steps[i], keep_graph);
    for (; next_finished < finished.size() && finished[next_finished].after_step == i;
         ++next_finished)
      run_post_accumulate_hooks(finished[next_finished].leaf);
  }
}

// The leaves with hooks that a walk over `steps` (from `roots`) may reach: their gradients are
// set aside before the walk and hooked(this walk's sum) is added back afterwards.
struct HookedLeaf {
  Tensor leaf, old_grad;
};
std::vector<HookedLeaf> set_aside_hooked_leaves(const std::vector<Step>& steps,
                                                const std::vector<Tensor>& roots) {
  std::vector<HookedLeaf> leaves;
  std::unordered_set<const TensorImpl*> seen;
  auto consider = [&](const Tensor& t) {
    if (!has_hooks(t) || t.impl()->grad_fn || !seen.insert(t.impl()).second) return;
    leaves.push_back(HookedLeaf{t, t.impl()->grad});
    t.impl()->grad = Tensor();
  };
  for (const Tensor& r : roots) consider(r);
  for (const Step& s : steps)
    for (const Tensor& in : s.node->inputs) consider(in);
  return leaves;
}

void put_back_hooked_leaves(std::vector<HookedLeaf>& leaves) {
  for (HookedLeaf& h : leaves) {
    TensorImpl* impl = h.leaf.impl();
    Tensor fresh = impl->grad;
    impl->grad = h.old_grad;
    if (!fresh.defined()) continue;
    Tensor hooked;
    {
      GradModeScope mode(g_create_graph);
      hooked = apply_hooks(h.leaf, fresh);
    }
    if (!h.old_grad.defined()) {
      impl->grad = (hooked.same(fresh) || g_create_graph) ? hooked : raw::clone(hooked);
    } else if (g_create_graph) {
      GradModeScope on(true);
      impl->grad = add(h.old_grad, hooked);
    } else {
      accumulate_grad(h.leaf, hooked);
    }
  }
}

// Everything a walk sets for its duration (create_graph, the walk number), put back on exit.
class WalkScope {
 public:
  explicit WalkScope(bool create_graph)
      : create_(std::exchange(g_create_graph, create_graph)),
        walk_(std::exchange(g_current_walk, g_next_walk.fetch_add(1))) {}
  ~WalkScope() {
    g_create_graph = create_;
    g_current_walk = walk_;
  }
  WalkScope(const WalkScope&) = delete;
  WalkScope& operator=(const WalkScope&) = delete;

 private:
  bool create_;
  uint64_t walk_;
};

// "in module 'a.b' with inputs [2, 3] float32, [3] float32": where anomaly mode says a node was
// made.
std::string describe_creation(const std::vector<Tensor>& inputs) {
  std::string where =
      g_scopes.empty()
          ? std::string("outside any module's forward")
          : fmt::format("in module '{}'", g_scopes.back().describe(g_scopes.back().owner));
  std::string shapes;
  for (const Tensor& in : inputs) shapes += (shapes.empty() ? "" : ", ") + in.describe();
  return fmt::format("{} with inputs {}", where, shapes.empty() ? "(none)" : shapes);
}
}  // namespace

bool grad_enabled() { return detail::grad_mode; }
NoGradGuard::NoGradGuard() : previous_(detail::grad_mode) { detail::grad_mode = false; }
NoGradGuard::~NoGradGuard() { detail::grad_mode = previous_; }

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!detail::grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!detail::grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

RecordedNode record(const char* op, std::vector<Tensor> inputs, Tensor& output,
                    BackwardFn backward) {
  if (!g_release_candidates.empty()) release_unheld_inputs();
  if (!backward)
    throw std::logic_error(
        fmt::format("autograd: op '{}' has no backward and cannot be recorded", op));
  for (const Tensor& in : inputs)
    if (in.same(output))
      throw std::logic_error(
          fmt::format("autograd: op '{}' returns its input {} itself; record a view or a copy", op,
                      in.describe()));
  std::vector<uint64_t> versions(inputs.size(), GraphNode::kNotSaved);
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].defined()) versions[k] = inputs[k].version();
  std::string made_at;
  if (g_anomaly) [[unlikely]]
    made_at = describe_creation(inputs);
  TensorImpl* impl = output.impl();
  impl->requires_grad = true;
  impl->is_leaf = false;
  auto* node = new GraphNode(op, std::move(inputs), std::move(backward), current_op_family());
  node->input_versions = std::move(versions);
  if (g_create_graph) node->made_by_backward_of = g_backward_of;
  if (g_anomaly) [[unlikely]]
    node->made_at = std::make_unique<std::string>(std::move(made_at));
  impl->grad_fn = std::shared_ptr<GraphNode>(node, delete_node);
  return RecordedNode(node, impl->grad_fn);
}

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

RecordedNode& RecordedNode::releases_values_of(size_t input) {
  if (input >= node_->inputs.size())
    throw std::logic_error(fmt::format("autograd: op '{}' releases input {} of {}", node_->op,
                                       input, node_->inputs.size()));
  node_->input_versions[input] = GraphNode::kNotSaved;  // never read: no version to check
  g_release_candidates.push_back({owner_, input});
  return *this;
}

RecordedNode& RecordedNode::composed() {
  node_->composed = true;
  return *this;
}

RecordedNode& RecordedNode::differentiable(DifferentiableBackwardFn backward) {
  node_->differentiable = std::move(backward);
  return *this;
}

Tensor detach(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor view = Tensor::from_storage(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
  if (!t.name().empty()) view.set_name(t.name());
  return view;
}

void accumulate_grad(const Tensor& input, const Tensor& g) {
  if (g_create_graph) {
    accumulate_recorded(input, g);
    return;
  }
  TensorImpl* impl = input.impl();
  if (!impl->grad.defined() && adoptable(input, g)) {
    impl->grad = g;
    // The running node's gradient buffer is given away at most once: a later view of it (or the
    // gradient itself) must not become a second input's gradient over the same memory.
    if (g.storage().get() == g_node_grad_storage) g_node_grad_storage = nullptr;
    return;
  }
  Tensor target = grad_of(input);
  target.storage()->bump_version();  // an in-place write (a gradient may be saved by a graph)
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

const char* recorded_op(const Tensor& t) {
  const GraphNode* node = t.defined() ? t.impl()->grad_fn.get() : nullptr;
  return node ? node->op : nullptr;
}

const std::vector<Tensor>& recorded_inputs(const Tensor& t) {
  static const std::vector<Tensor> none;
  const GraphNode* node = t.defined() ? t.impl()->grad_fn.get() : nullptr;
  return node ? node->inputs : none;
}

uint64_t recorded_sequence(const Tensor& t) {
  const GraphNode* node = t.defined() ? t.impl()->grad_fn.get() : nullptr;
  if (!node)
    throw std::invalid_argument(
        fmt::format("recorded_sequence: tensor {} is a leaf: no recorded op made it",
                    t.defined() ? t.describe() : std::string("(undefined)")));
  return node->sequence;
}

// A depth-first search from the roots that finds each node once (a set of creation numbers: a
// tensor used twice is reached twice), then a sort by creation number, newest first. Linear in the
// graph's size plus the sort. The search's own order is not a valid order: in a diamond it can
// reach a node before one of the nodes that read it.
DG_EXERCISE std::vector<Tensor> backward_order(const std::vector<Tensor>& roots) {
  std::vector<Tensor> order;
  std::vector<Tensor> stack;
  std::unordered_set<uint64_t> found;
  auto visit = [&](const Tensor& t) {
    if (recorded_op(t) == nullptr) return;  // a leaf or undefined: nothing to run
    if (!found.insert(recorded_sequence(t)).second) return;
    stack.push_back(t);
  };
  for (const Tensor& root : roots) visit(root);
  while (!stack.empty()) {
    Tensor t = std::move(stack.back());
    stack.pop_back();
    for (const Tensor& in : recorded_inputs(t)) visit(in);
    order.push_back(std::move(t));
  }
  std::sort(order.begin(), order.end(), [](const Tensor& a, const Tensor& b) {
    return recorded_sequence(a) > recorded_sequence(b);
  });
  return order;
}

namespace {
// What backward() and grad() check before a walk that runs `steps` changes any gradient.
void check_walk(const std::vector<Step>& steps, const char* who, bool create_graph) {
  check_not_freed(steps, who);
  check_versions(steps, who);
  if (create_graph) check_differentiable(steps, who);
}
}  // namespace

void backward(const Tensor& root, const Tensor& grad_root, bool keep_graph, bool create_graph) {
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
  if (create_graph) keep_graph = true;
  if (!g_release_candidates.empty()) release_unheld_inputs();
  NoGradGuard no_grad;  // ops inside backward closures are not recorded (unless create_graph)
  WalkScope walk(create_graph);
  std::vector<Step> steps = reachable({root});
  check_walk(steps, "backward", create_graph);
  const std::vector<FinishedLeaf> finished = leaves_with_post_accumulate_hooks(steps, root);
  std::vector<HookedLeaf> hooked = set_aside_hooked_leaves(steps, {root});
  try {
    seed(root, grad_root, "backward");
    run(steps, keep_graph, finished);
  } catch (...) {
    for (HookedLeaf& h : hooked) h.leaf.impl()->grad = h.old_grad;
    throw;
  }
  put_back_hooked_leaves(hooked);
  for (const FinishedLeaf& f : finished)  // the root, and leaves whose hooks ran just now
    if (f.after_step == steps.size()) run_post_accumulate_hooks(f.leaf);
}

namespace {
// Why an output may not require grad: a gradient made without create_graph has no graph.
constexpr const char* kNotDifferentiableAgain =
    " (if it is, or is computed from, a gradient an earlier grad() or backward() returned, that "
    "call needs create_graph = true for its result to be differentiated again)";
}  // namespace

template <int>
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool keep_graph,
                         bool create_graph, bool allow_unused) {
  if (outputs.empty()) throw std::invalid_argument("grad: no outputs");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument(
        fmt::format("grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i].defined() || !outputs[i].requires_grad())
      throw std::invalid_argument(fmt::format("grad: output {} ({}) does not require grad{}", i,
                                              outputs[i].describe(),
                                              outputs[i].defined() ? kNotDifferentiableAgain : ""));
  std::unordered_map<const TensorImpl*, size_t> wanted;  // requested input -> its index
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad())
      throw std::invalid_argument(
          fmt::format("grad: input {} ({}) does not require grad", i, inputs[i].describe()));
    wanted.emplace(inputs[i].impl(), i);
  }
  if (create_graph) keep_graph = true;
  if (!g_release_candidates.empty()) release_unheld_inputs();
  NoGradGuard no_grad;
  WalkScope walk(create_graph);
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
  check_walk(steps, "grad", create_graph);

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
  auto put_back = [&] {
    for (Saved& s : saved) s.tensor.impl()->grad = s.grad, s.tensor.impl()->retain_grad = s.retain;
  };
  std::vector<Tensor> result(inputs.size());
  try {
    for (size_t i = 0; i < outputs.size(); ++i)
      seed(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i], "grad");
    run(steps, keep_graph);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!used[i]) continue;
      Tensor g = inputs[i].impl()->grad;
      if (!g.defined()) g = Tensor::zeros(inputs[i].shape(), inputs[i].dtype());
      if (has_hooks(inputs[i])) {  // a leaf's hooks (a non-leaf's ran before its node, once)
        GradModeScope mode(create_graph);
        g = apply_hooks(inputs[i], g);
      }
      result[i] = g;
    }
  } catch (...) {
    put_back();
    throw;
  }
  put_back();
  return result;
}
template std::vector<Tensor> grad<0>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                     const std::vector<Tensor>&, bool, bool, bool);

HookHandle Tensor::register_hook(std::function<Tensor(const Tensor& grad)> hook) const {
  if (!defined()) throw std::invalid_argument("register_hook: the tensor is undefined");
  if (!requires_grad())
    throw std::invalid_argument(fmt::format(
        "register_hook: tensor {} does not require grad, so no gradient will reach a hook on it",
        describe()));
  if (!hook) throw std::invalid_argument("register_hook: the hook is empty");
  if (!impl_->hooks) impl_->hooks = std::make_shared<GradHooks>();
  GradHooks& h = *impl_->hooks;
  const uint64_t id = h.next_id++;
  h.hooks.emplace_back(id, std::move(hook));
  return HookHandle([weak = std::weak_ptr<GradHooks>(impl_->hooks), id] {
    if (auto h = weak.lock())
      std::erase_if(h->hooks, [id](const auto& entry) { return entry.first == id; });
  });
}

HookHandle Tensor::register_post_accumulate_grad_hook(
    std::function<void(const Tensor& leaf)> hook) const {
  if (!defined())
    throw std::invalid_argument("register_post_accumulate_grad_hook: the tensor is undefined");
  if (!requires_grad() || impl_->grad_fn)
    throw std::invalid_argument(fmt::format(
        "register_post_accumulate_grad_hook: tensor {} is not a leaf that requires grad (only a "
        "leaf's gradient is accumulated)",
        describe()));
  if (!hook) throw std::invalid_argument("register_post_accumulate_grad_hook: the hook is empty");
  if (!impl_->hooks) impl_->hooks = std::make_shared<GradHooks>();
  GradHooks& h = *impl_->hooks;
  const uint64_t id = h.next_id++;
  h.post_accumulate.emplace_back(id, std::move(hook));
  g_post_accumulate_hooks.fetch_add(1, std::memory_order_relaxed);
  return HookHandle([weak = std::weak_ptr<GradHooks>(impl_->hooks), id] {
    auto h = weak.lock();
    if (h && std::erase_if(h->post_accumulate, [id](const auto& e) { return e.first == id; }))
      g_post_accumulate_hooks.fetch_sub(1, std::memory_order_relaxed);
  });
}

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(g_anomaly) { g_anomaly = enabled; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = previous_; }
bool anomaly_enabled() { return g_anomaly; }

CreationScope::CreationScope(const void* owner, std::string (*describe)(const void*)) {
  g_scopes.push_back(ScopeEntry{owner, describe});
}
CreationScope::~CreationScope() { g_scopes.pop_back(); }

int64_t live_graph_nodes() { return g_live_nodes.load(std::memory_order_relaxed); }

void set_backward_observer(BackwardObserver* observer) { g_observer = observer; }

}  // namespace dg
