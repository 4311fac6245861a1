// Reverse-mode autograd over a graph owned by the tensors. Every recorded op makes a node (op,
// inputs, backward closure, creation number) that its output tensor holds; a node holds its
// inputs, so a graph lives exactly as long as a tensor can reach it and is freed with the last
// one (a forward without backward leaves nothing behind). backward(root) runs the nodes root
// depends on, newest first (the reverse of execution order), and frees each once it has run.
//
// The backward contract (the same for every op) is written once, below: a backward adds each
// input's vector-Jacobian product into its gradient with accumulate_grad.
// This file does not define any op (see autograd/ops.h) and holds no fast-kernel shortcut (see
// autograd/grad_sink.h). Not supported: double backward (PyTorch's create_graph): the walk
// records nothing, so a gradient of a gradient needs the first derivative written as a forward
// composition of ops and differentiated with backward() or grad().
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

using BackwardFn = std::function<void(const Tensor& grad_output)>;

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

// Records `output` as the result of `op` applied to `inputs`: output holds the new node, which
// holds the inputs and `backward`. Marks output as requiring grad and as a non-leaf. Throws
// naming `op` when `backward` is empty (an op without a backward cannot be recorded) or when
// output is one of its inputs. `backward` must not capture `output` itself (that would be a
// reference cycle, output -> node -> closure -> output, and the graph would never be freed):
// capture detach(output), which shares its values without its graph.
void record(const char* op, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward);

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
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), bool keep_graph = false);

// The gradients of `outputs` with respect to `inputs`, as torch.autograd.grad: no `.grad` of any
// tensor changes. `grad_outputs` holds one gradient per output (undefined: the output must hold
// one element, gradient 1); empty means all undefined. Only the nodes on a path from an output to
// an input run, and they are freed unless keep_graph. An input the outputs do not depend on
// throws naming it, unless allow_unused (its result is then undefined); an input reached whose
// gradient no backward wrote gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool keep_graph = false,
                         bool allow_unused = false);

// Keeps the gradient of a non-leaf tensor after backward (for inspection and tests).
void retain_grad(const Tensor& t);

// Graph nodes alive now in the process (recorded and not yet freed), for tests and diagnostics.
int64_t live_graph_nodes();

// ---- An observer of the backward walk, for test tools (tests/support/plant_error.cpp) ----------
// before() runs just before a node's backward, after() just after it (before the shape checks),
// each with the node's op name and inputs. None is set by default; unset, it costs one branch per
// node. Grad mode is off during the walk, so what it computes with ops is not recorded.
struct BackwardObserver {
  virtual ~BackwardObserver() = default;
  virtual void before(const char* op, const std::vector<Tensor>& inputs) {}
  virtual void after(const char* op, const std::vector<Tensor>& inputs) {}
};
// Installs `observer` for every later backward() on any thread (nullptr removes it). The caller
// keeps it alive while installed.
void set_backward_observer(BackwardObserver* observer);

}  // namespace dg
