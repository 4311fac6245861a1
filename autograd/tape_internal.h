// What the tape's files share, not public: the graph node, a step of the walk, the walk's state,
// and the points where the core (tape.cpp) calls its extensions. Each extension lives in a
// sibling file (tape_hooks.cpp, tape_create_graph.cpp, tape_anomaly.cpp, tape_value_release.cpp,
// tape_checks.cpp, tape_observer.cpp, tape_grad.cpp); autograd/README.md has the map.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "tensor/profile.h"  // OpFamily

namespace dg {

// One recorded op. Its output tensor owns it (TensorImpl::grad_fn); it owns its inputs, and so
// the nodes that made them. It never holds its output (that would be a cycle).
struct GraphNode {
  GraphNode(const char* op, std::vector<Tensor> inputs, BackwardFn backward, OpFamily family);
  ~GraphNode();
  GraphNode(const GraphNode&) = delete;
  GraphNode& operator=(const GraphNode&) = delete;

  const char* op;
  std::vector<Tensor> inputs;
  BackwardFn backward;
  OpFamily family;  // the op family its forward was timed under (tensor/profile.h)
  uint64_t sequence;
  bool freed = false;   // a backward without keep_graph ran it and released what it held
  bool needed = false;  // grad(): some requested input lies below it

  // Version check (tape_checks.cpp): input k's version when recorded (kNotSaved: the
  // backward does not read it), and other tensors the backward reads (its output) with theirs.
  static constexpr uint64_t kNotSaved = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> input_versions;
  std::vector<std::pair<Tensor, uint64_t>> other_saved;

  // create_graph (tape_create_graph.cpp): a composed backward runs itself with grad mode on;
  // else `differentiable` runs.
  bool composed = false;
  DifferentiableBackwardFn differentiable;
  const char* made_by_backward_of =
      nullptr;  // recorded by a create_graph walk inside this op's backward
  std::unique_ptr<std::string> made_at;  // anomaly mode: where the node was recorded
};

// A node to run and the tensor it made; the handle keeps the tensor (and so the node and its
// gradient) alive until the node has run, whoever else lets go of it.
struct Step {
  Tensor output;
  GraphNode* node;
};

// A leaf whose gradient no node after `after_step` adds to, with the post-accumulate hooks it
// holds (register_post_accumulate_grad_hook): they run once that step has run
// (run, tape_hooks.cpp).
struct FinishedLeaf {
  size_t after_step;
  Tensor leaf;
};

// ---- This thread's tape state ----------------------------------------------------------------
// The running walk records its backward (create_graph), and its number (hooks run once a walk):
// both set by WalkScope (tape.cpp).
extern thread_local constinit bool g_create_graph;
extern thread_local constinit uint64_t g_current_walk;
// The op whose backward a create_graph walk runs (run_recorded_backward, tape_create_graph.cpp).
extern thread_local constinit const char* g_backward_of;
// A DetectAnomalyGuard is on (tape_anomaly.cpp).
extern thread_local constinit bool g_anomaly;

// Sets grad mode for a scope (the walk turns it on around a create_graph backward).
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : previous_(detail::grad_mode) { detail::grad_mode = on; }
  ~GradModeScope() { detail::grad_mode = previous_; }

 private:
  bool previous_;
};

// Everything a walk sets for its duration (create_graph, the walk number), put back on exit.
class WalkScope {
 public:
  explicit WalkScope(bool create_graph);
  ~WalkScope();
  WalkScope(const WalkScope&) = delete;
  WalkScope& operator=(const WalkScope&) = delete;

 private:
  bool create_;
  uint64_t walk_;
};

// ---- The core's pieces that grad() (tape_grad.cpp) also uses (tape.cpp) -----------------------
std::vector<Step> reachable(const std::vector<Tensor>& roots);
void seed(const Tensor& root, const Tensor& grad_root, const char* who);
void run(std::vector<Step>& steps, bool keep_graph, const std::vector<FinishedLeaf>& finished = {});

// ---- The checks before a walk changes any gradient (tape_checks.cpp) ---------------------------
// backward()'s root must be defined and require grad; else says why it does not.
void check_backward_root(const Tensor& root);
// What backward() and grad() check before a walk runs `steps`: no node freed by an earlier
// backward, no saved tensor written in place since (RecordedNode::saves), and under create_graph
// a differentiable backward for every node (check_differentiable).
void check_walk(const std::vector<Step>& steps, const char* who, bool create_graph);
// Refuses to run a node an earlier backward freed, naming its op.
void check_not_freed(const std::vector<Step>& steps, const char* who);
// Refuses a walk that would read a saved tensor written in place since its node was recorded.
void check_versions(const std::vector<Step>& steps, const char* who);
// After a node's backward: every gradient it wrote must have its input's shape and dtype; else
// throws naming the op.
void check_gradient_shapes(const GraphNode& node);

// ---- Value release (tape_value_release.cpp) ---------------------------------------------------
// Frees the values of every input a node said it does not read (RecordedNode::releases_values_of)
// once only that node holds them; nothing when there is no such input on this thread.
void release_unheld_inputs();

// ---- Double backward, create_graph (tape_create_graph.cpp) ------------------------------------
// accumulate_grad under create_graph: the gradient becomes a recorded sum, never written in place.
void accumulate_recorded(const Tensor& input, const Tensor& g);
// One node's backward under create_graph, with grad mode on: the node's differentiable backward,
// or its composed one.
void run_recorded_backward(GraphNode& node, const Tensor& output, const Tensor& grad_output);
// Under create_graph every node must have a backward that records: refuses, naming the op.
void check_differentiable(const std::vector<Step>& steps, const char* who);

// ---- Anomaly mode (tape_anomaly.cpp) ----------------------------------------------------------
// "in module 'a.b' with inputs [2, 3] float32, [3] float32": where a node is being recorded.
std::string describe_creation(const std::vector<Tensor>& inputs);
// Throws when the node just run left a non-finite value in an input's gradient.
void check_gradients_finite(const GraphNode& node, const Tensor& output);

// ---- Hooks (tape_hooks.cpp) -------------------------------------------------------------------
bool has_hooks(const Tensor& t);  // register_hook's hooks, at least one
// g after every hook registered on `t` (each on the previous one's result), once per walk, with
// grad mode on only under create_graph.
Tensor hooked_gradient(const Tensor& t, Tensor g);

// The leaves with post-accumulate hooks that a backward over `steps` (from `root`) reaches, in
// the order their gradients become final (steps.size(): after the whole walk).
std::vector<FinishedLeaf> leaves_with_post_accumulate_hooks(const std::vector<Step>& steps,
                                                            const Tensor& root);
void run_post_accumulate_hooks(const Tensor& leaf);
// After the walk: the hooks of the leaves in `finished` that wait for the end of a walk of `steps`.
void run_post_accumulate_hooks_at_end(const std::vector<FinishedLeaf>& finished, size_t steps);

// The leaves with register_hook's hooks that a walk over `steps` (from `roots`) may reach: their
// gradients are set aside before the walk (set_aside_hooked_leaves) and hooked(this walk's sum)
// is added back afterwards (put_back_hooked_leaves); restore_hooked_leaves undoes the setting
// aside when the walk throws.
struct HookedLeaf {
  Tensor leaf, old_grad;
};
std::vector<HookedLeaf> set_aside_hooked_leaves(const std::vector<Step>& steps,
                                                const std::vector<Tensor>& roots);
void put_back_hooked_leaves(std::vector<HookedLeaf>& leaves);
void restore_hooked_leaves(std::vector<HookedLeaf>& leaves);

// ---- The test tools' observer (tape_observer.cpp) ---------------------------------------------
extern BackwardObserver* g_observer;  // set_backward_observer's; null unless one is installed
// Calls observer's `when` (before or after) with grad mode off; nothing when observer is null.
void observe(BackwardObserver* observer, void (BackwardObserver::*when)(const ObservedNode&),
             const ObservedNode& node);

}  // namespace dg
