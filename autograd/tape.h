// Reverse-mode autograd over a graph owned by the tensors. Every recorded op makes a node (op,
// inputs, backward closure, creation number) that its output tensor holds; a node holds its
// inputs, so a graph lives exactly as long as a tensor can reach it and is freed with the last
// one (a forward without backward leaves nothing behind). backward(root) runs the nodes root
// depends on, newest first (the reverse of execution order), and frees each once it has run.
//
// The backward contract (the same for every op) is written once, below: a backward adds each
// input's vector-Jacobian product into its gradient with accumulate_grad. What makes the graph
// trustworthy, also here: version checks of saved tensors (an in-place write after an op saved
// a tensor makes its backward refuse), gradients of gradients (create_graph), hooks on a
// tensor's gradient (declared on Tensor, tensor/tensor.h), and anomaly mode (the op whose
// backward made the first NaN, and where that op was recorded; autograd/tape_anomaly.h, included
// here, as is autograd/tape_observer.h, the walk's observer for test tools). The code is in
// autograd/tape.cpp (the core) and its sibling files (autograd/README.md has the map).
// This file does not define any op (see autograd/ops.h) and holds no fast-kernel shortcut (see
// autograd/grad_sink.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tape_anomaly.h"
#include "autograd/tape_observer.h"
#include "tensor/tensor.h"

namespace dg {

using BackwardFn = std::function<void(const Tensor& grad_output)>;
// A backward written with recorded ops only, for create_graph: it also receives the op's output
// with its graph (a backward that needs the output, as exp's, must use this one and not a
// detached copy, or the second derivative loses the output's dependence on the input).
using DifferentiableBackwardFn =
    std::function<void(const Tensor& grad_output, const Tensor& output)>;

// Grad mode (thread-local). NoGradGuard turns recording off for its scope. The backward walk
// runs with grad mode off: ops called inside a backward closure are never recorded.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and at least one of `inputs` requires grad: the op must record.
bool should_record(std::initializer_list<Tensor> inputs);
bool should_record(const std::vector<Tensor>& inputs);

// What record() returns: the new node, to say more about its backward (each call optional).
class RecordedNode {
 public:
  RecordedNode(GraphNode* node, std::weak_ptr<GraphNode> owner)
      : node_(node), owner_(std::move(owner)) {}
  // The tensors the backward reads: their versions are recorded now, and a backward after any of
  // them (or a view of its storage) was written in place throws before any gradient is written.
  // By default every input is saved; an op whose backward needs only shapes says saves({}), one
  // that reads its output lists it (pass the output itself, or detach(output)).
  RecordedNode& saves(std::initializer_list<Tensor> tensors);
  // The backward is written with recorded ops only (no kernel, no captured detached output): under
  // create_graph it runs with grad mode on and is itself recorded, so it has a gradient too.
  RecordedNode& composed();
  // The backward to run under create_graph instead of `backward` (which uses kernels): written
  // with recorded ops, it gets the op's output with its graph. An op with neither composed() nor
  // this refuses create_graph, naming itself.
  RecordedNode& differentiable(DifferentiableBackwardFn backward);
  // The backward never reads input k's values: the op kept its own copy of what it needs (linear
  // in bf16 precision keeps its input rounded to bf16, as PyTorch's autocast saves the bf16 cast).
  // Once nothing but this node holds input k and its storage (the caller dropped it, no view
  // shares it), the tape frees those values: the input stays in the graph with its shape, dtype,
  // node and gradient. This is PyTorch's saved-tensor packing for one case: the node saves a
  // smaller form instead of the input. The backward must capture input k only as a WeakTensor,
  // and the op must not save it (saves() without it) nor offer a create_graph backward that
  // reads it. The tape looks for inputs to free each time an op is recorded and when a backward
  // starts.
  RecordedNode& releases_values_of(size_t input);

 private:
  GraphNode* node_;
  std::weak_ptr<GraphNode> owner_;
};

// A tensor held without keeping it alive (std::weak_ptr's role): lock() is the tensor while
// anything else holds it, else an undefined tensor. A backward that releases_values_of an input
// captures it this way; the node's input list holds it while the backward runs.
class WeakTensor {
 public:
  WeakTensor() = default;
  explicit WeakTensor(const Tensor& t);
  Tensor lock() const;

 private:
  std::weak_ptr<TensorImpl> impl_;
};

// Records `output` as the result of `op` applied to `inputs`: output holds the new node, which
// holds the inputs and `backward`. Marks output as requiring grad and as a non-leaf. Throws
// naming `op` when `backward` is empty (an op without a backward cannot be recorded) or when
// output is one of its inputs. `backward` must not capture `output` itself (that would be a
// reference cycle, output -> node -> closure -> output, and the graph would never be freed):
// capture detach(output), which shares its values without its graph.
RecordedNode record(const char* op, std::vector<Tensor> inputs, Tensor& output,
                    BackwardFn backward);

// A tensor sharing t's storage, shape and strides but none of its autograd metadata (no node, no
// gradient, not requiring grad), as PyTorch's detach(). What a backward captures of its output.
Tensor detach(const Tensor& t);

// ---- Writing a gradient: all a new op's author needs -----------------------------------------
// A backward receives g, the gradient of its op's output; it reads g and never writes it. For
// each input that requires grad it computes the vector-Jacobian product t and calls
//     accumulate_grad(input, t);
// which adds t into input's gradient, summing over the axes along which input was broadcast (t
// may have input's shape or the op's output shape). Call it once per contribution: an input
// passed twice (add(x, x)) gets two calls and their sum. accumulate_grad may keep t as the
// gradient instead of copying it, so do not write t afterwards. After each node runs, every
// input's gradient shape is checked against the input's; a mismatch names the op. Leaves'
// gradients add up across backward() calls until zeroed; a non-leaf's is dropped once its node
// has run, unless retain_grad(t). (The built-in fast kernels skip the zero-fill of a new gradient
// with autograd/grad_sink.h, which also states the ownership rules; a new op never needs it.)
void accumulate_grad(const Tensor& input, const Tensor& t);

// Runs backward from `root` through exactly the nodes root depends on, in reverse creation
// order, adding into the gradients of the tensors they reach. With `grad_root` undefined, root
// must hold one element and its gradient is 1. Unless keep_graph is set (PyTorch's
// retain_graph), each node is freed as soon as it has run (its closure and the buffers its op
// saved are released while the rest of the walk runs); a later backward that reaches a freed
// node throws, naming its op, before any gradient changes (PyTorch raises only when that node
// had saved tensors). Other graphs are not touched. One root: PyTorch's backward of several
// tensors at once is grad() here, or one backward per root.
// Before any gradient is written, the walk also throws when a tensor a node saved was written
// in place since (naming the op, the tensor and both versions), and, with create_graph, when a
// node's op has no differentiable backward (naming the op).
// create_graph: the backward itself is recorded, so the gradients it leaves have a graph and can
// be differentiated again (Hessian-vector products, derivatives inside a loss). It implies
// keep_graph (PyTorch's default), and a leaf's grad() becomes a new tensor (old + new, recorded)
// rather than a sum written into the old one.
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), bool keep_graph = false,
              bool create_graph = false);

// The gradients of `outputs` with respect to `inputs`, as torch.autograd.grad: no `.grad` of any
// tensor changes. `grad_outputs` holds one gradient per output (undefined: the output must hold
// one element, gradient 1); empty means all undefined. Only the nodes on a path from an output to
// an input run, and they are freed unless keep_graph. An input the outputs do not depend on
// throws naming it, unless allow_unused (its result is then undefined); an input reached whose
// gradient no backward wrote gets zeros. create_graph as backward's: the results have a graph
// (torch.autograd.grad(..., create_graph=True)); grad_outputs that require grad are part of it.
// The arguments are in torch's order. (A template of one instance, defined in tape_grad.cpp, only
// so that grad(outputs, inputs, {.create_graph = true}) below picks the GradOptions overload: GCC
// 12 also counts a designated list as a candidate for the vector, and the non-template then wins.)
template <int = 0>
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool keep_graph = false,
                         bool create_graph = false, bool allow_unused = false);
extern template std::vector<Tensor> grad<0>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                            const std::vector<Tensor>&, bool, bool, bool);
// grad()'s options by name, torch's keywords (retain_graph is keep_graph), so that two bools
// cannot be swapped unseen:
//   grad({loss}, {x}, {.retain_graph = true, .create_graph = true})
// (grad(outputs, inputs) alone takes the defaults; grad(outputs, inputs, {}) is ambiguous.)
struct GradOptions {
  std::vector<Tensor> grad_outputs = {};
  bool retain_graph = false;
  bool create_graph = false;
  bool allow_unused = false;
};
inline std::vector<Tensor> grad(const std::vector<Tensor>& outputs,
                                const std::vector<Tensor>& inputs, const GradOptions& options) {
  return grad<0>(outputs, inputs, options.grad_outputs, options.retain_graph, options.create_graph,
                 options.allow_unused);
}

// ---- The graph, read only, and the walk's order ----------------------------------------------
// What a node holds, seen from the tensor it made (chapter 2 of the learner's path reads the graph
// through these). recorded_op: the op's name, or nullptr when t is a leaf (no recorded op made it).
// recorded_inputs: the op's inputs (empty for a leaf, and for a node a backward has freed).
// recorded_sequence: the op's creation number, unique and larger for a later op; throws
// std::invalid_argument for a leaf.
const char* recorded_op(const Tensor& t);
const std::vector<Tensor>& recorded_inputs(const Tensor& t);
uint64_t recorded_sequence(const Tensor& t);

// The tensors made by the recorded ops that `roots` depend on (the roots themselves included when
// an op made them), each once, newest first: decreasing recorded_sequence, the reverse of the
// order the forward ran them. A node runs only after every node that reads its output has run, so
// its output's gradient is complete when its backward reads it. backward() and grad() run their
// nodes in this order. Leaves and undefined tensors are not in it.
std::vector<Tensor> backward_order(const std::vector<Tensor>& roots);

// Keeps the gradient of a non-leaf tensor after backward (for inspection and tests).
void retain_grad(const Tensor& t);

// Graph nodes alive now in the process (recorded and not yet freed), for tests and diagnostics.
int64_t live_graph_nodes();

}  // namespace dg
