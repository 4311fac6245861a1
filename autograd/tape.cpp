// The tape's core (see tape.h for the contract): recording a node, the order of the walk
// (backward_order), the walk (run_step, run, backward) and accumulate_grad, to read top to bottom.
// It calls its extensions at named points (declared in tape_internal.h); they live beside it:
// tape_hooks.cpp (gradient hooks), tape_create_graph.cpp (double backward), tape_anomaly.cpp,
// tape_value_release.cpp, tape_checks.cpp (the refusals before a walk, the shape check after a
// node), tape_observer.cpp (test tools'), tape_grad.cpp (grad()) and tape_grad_mode.cpp.
// autograd/README.md has the map. backward_order is an exercise of the learner's path's chapter 2
// (autograd/learn-02-graph.md): a weak definition (tensor/exercise.h) a learner's may replace. It
// plants no errors itself: test tools do that through the observer.
#include "autograd/tape.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "autograd/grad_sink.h"  // grad_of
#include "autograd/op_trace.h"   // trace_recorded
#include "autograd/tape_internal.h"
#include "tensor/exercise.h"
#include "tensor/kernels_elementwise.h"  // add_reduced_into
#include "tensor/kernels_matmul.h"       // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
std::atomic<int64_t> g_live_nodes{0};
std::atomic<uint64_t> g_next_sequence{0};  // creation numbers: the walk runs them in reverse
std::atomic<uint64_t> g_next_walk{1};      // numbers the walks (WalkScope): hooks run once a walk
}  // namespace

GraphNode::GraphNode(const char* op, std::vector<Tensor> inputs, BackwardFn backward,
                     OpFamily family)
    : op(op),
      inputs(std::move(inputs)),
      backward(std::move(backward)),
      family(family),
      sequence(g_next_sequence.fetch_add(1, std::memory_order_relaxed)) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}
GraphNode::~GraphNode() { g_live_nodes.fetch_sub(1, std::memory_order_relaxed); }

int64_t live_graph_nodes() { return g_live_nodes.load(std::memory_order_relaxed); }

// ---- record ------------------------------------------------------------------------------------

namespace {
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
}  // namespace

RecordedNode record(const char* op, std::vector<Tensor> inputs, Tensor& output,
                    BackwardFn backward) {
  release_unheld_inputs();
  if (!backward)
    throw std::logic_error(
        fmt::format("autograd: op '{}' has no backward and cannot be recorded", op));
  for (const Tensor& in : inputs)
    if (in.same(output))
      throw std::logic_error(
          fmt::format("autograd: op '{}' returns its input {} itself; record a view or a copy", op,
                      in.describe()));
  std::vector<uint64_t> versions(inputs.size(), GraphNode::kNotSaved);  // by default all saved
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].defined()) versions[k] = inputs[k].version();
  std::string made_at;
  if (g_anomaly) [[unlikely]]
    made_at = describe_creation(inputs);
  if (tracing()) [[unlikely]]
    trace_recorded(op, output);  // an exporter's trace (autograd/op_trace.h)
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

Tensor detach(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor view = Tensor::from_storage(t.storage(), t.shape(), t.strides(), t.offset(), t.dtype());
  if (!t.name().empty()) view.set_name(t.name());
  return view;
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

// ---- the order ---------------------------------------------------------------------------------

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

// ---- accumulate --------------------------------------------------------------------------------

namespace {
// The storage of the running node's output gradient while backward() runs that node, when the
// walk drops that gradient afterwards (not retained); null otherwise. See adoptable().
thread_local const Storage* g_node_grad_storage = nullptr;

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
}  // namespace

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

// ---- the walk ----------------------------------------------------------------------------------

thread_local constinit bool g_create_graph = false;
thread_local constinit uint64_t g_current_walk = 0;

WalkScope::WalkScope(bool create_graph)
    : create_(std::exchange(g_create_graph, create_graph)),
      walk_(std::exchange(g_current_walk, g_next_walk.fetch_add(1))) {}
WalkScope::~WalkScope() {
  g_create_graph = create_;
  g_current_walk = walk_;
}

namespace {
// Drops what a node holds for backward (its closure with the buffers it saved, its inputs) once
// it has run; the husk stays so that a second walk can name its op.
void free_node(GraphNode& node) {
  std::vector<Tensor> inputs = std::move(node.inputs);
  BackwardFn backward = std::move(node.backward);
  node.inputs = {};
  node.backward = nullptr;
  node.freed = true;
}

// Runs one node's backward, timed under its op's family: the fast one, or under create_graph the
// recorded one. While it runs, the output's gradient may be adopted by an input (adoptable)
// unless the output keeps it (retained) or the walk records.
void call_backward(GraphNode& node, const Tensor& output, const Tensor& grad_output,
                   bool retained) {
  ScopedOpTimer timer(node.family);
  g_node_grad_storage = retained || g_create_graph ? nullptr : grad_output.storage().get();
  try {
    if (g_create_graph)
      run_recorded_backward(node, output, grad_output);
    else
      node.backward(grad_output);
  } catch (...) {
    g_node_grad_storage = nullptr;
    throw;
  }
  g_node_grad_storage = nullptr;
}

// Runs one node's backward (grad mode as the walk sets it) and frees it unless keep_graph. A node
// whose output no gradient reached has nothing to add.
void run_step(Step& step, bool keep_graph) {
  GraphNode& node = *step.node;
  TensorImpl* out = step.output.impl();
  if (out->grad.defined()) {
    if (out->hooks) [[unlikely]]
      out->grad = hooked_gradient(step.output, out->grad);
    BackwardObserver* observer = g_observer;  // the test tools' (set_backward_observer)
    const ObservedNode observed{node.op, node.inputs, node.made_by_backward_of};
    observe(observer, &BackwardObserver::before, observed);
    Tensor grad_output = out->grad;
    if (!out->retain_grad) out->grad = Tensor();
    call_backward(node, step.output, grad_output, out->retain_grad);
    observe(observer, &BackwardObserver::after, observed);
    check_gradient_shapes(node);
    if (g_anomaly) [[unlikely]]
      check_gradients_finite(node, step.output);
  }
  if (!keep_graph) free_node(node);
  step.output = Tensor();
}
}  // namespace

// Runs `steps` (newest first) with grad mode off (on inside a create_graph backward), and the
// post-accumulate hooks of `finished` after the step each waits for (those waiting for the end
// are left to the caller). Unless keep_graph, each node is freed as soon as it has run, so the
// buffers it saved for backward return to the storage cache while later nodes' gradients are made.
void run(std::vector<Step>& steps, bool keep_graph, const std::vector<FinishedLeaf>& finished) {
  size_t next_finished = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    run_step(steps[i], keep_graph);
    for (; next_finished < finished.size() && finished[next_finished].after_step == i;
         ++next_finished)
      run_post_accumulate_hooks(finished[next_finished].leaf);
  }
}

void backward(const Tensor& root, const Tensor& grad_root, bool keep_graph, bool create_graph) {
  check_backward_root(root);
  if (create_graph) keep_graph = true;
  release_unheld_inputs();
  NoGradGuard no_grad;  // ops inside backward closures are not recorded (unless create_graph)
  WalkScope walk(create_graph);
  std::vector<Step> steps = reachable({root});
  check_walk(steps, "backward", create_graph);
  // Leaves with hooks (tape_hooks.cpp): post-accumulate hooks run as each leaf's gradient is
  // final; a leaf with register_hook's hooks gets hooked(this walk's sum) added after the walk.
  const std::vector<FinishedLeaf> finished = leaves_with_post_accumulate_hooks(steps, root);
  std::vector<HookedLeaf> hooked = set_aside_hooked_leaves(steps, {root});
  try {
    seed(root, grad_root, "backward");
    run(steps, keep_graph, finished);
  } catch (...) {
    restore_hooked_leaves(hooked);
    throw;
  }
  put_back_hooked_leaves(hooked);
  run_post_accumulate_hooks_at_end(finished, steps.size());
}

}  // namespace dg
