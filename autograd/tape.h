// Reverse-mode autograd as a tape. Every recorded op appends a node (inputs, output, backward
// closure) in execution order, which is already a topological order; backward() walks the tape
// in reverse and calls each closure with the gradient of that node's output.
//
// The backward contract (the same for every op) is written once, below: a backward adds each
// input's vector-Jacobian product into its gradient with accumulate_grad.
// This file does not define any op (see autograd/ops.h) and holds no fast-kernel shortcut (see
// autograd/grad_sink.h).
#pragma once
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

using BackwardFn = std::function<void(const Tensor& grad_output)>;

// Grad mode (thread-local). NoGradGuard turns recording off for its scope.
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

// Records `output` as the result of `op` applied to `inputs`. Marks output as requiring grad
// and as a non-leaf. Throws naming `op` when `backward` is empty (an op without a backward
// cannot be recorded).
void record(const char* op, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward);

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

// Runs the tape backward from `root`. With `grad_root` undefined, root must hold one element and
// its gradient is 1. Unless keep_graph is set, each node is dropped as soon as the walk has passed
// it (freeing the buffers its op saved for backward while the rest of the walk runs) and the tape
// is cleared afterwards.
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), bool keep_graph = false);

// Keeps the gradient of a non-leaf tensor after backward (for inspection and tests).
void retain_grad(const Tensor& t);

void clear_tape();
size_t tape_size();

// ---- An observer of the backward walk, for test tools (tests/support/plant_error.cpp) ----------
// before() runs just before a node's backward, after() just after it (before the shape checks),
// each with the node's op name and inputs. None is set by default; unset, it costs one branch per
// node. It must not record ops (grad mode stays on during the walk: use NoGradGuard).
struct BackwardObserver {
  virtual ~BackwardObserver() = default;
  virtual void before(const char* op, const std::vector<Tensor>& inputs) {}
  virtual void after(const char* op, const std::vector<Tensor>& inputs) {}
};
// Installs `observer` for every later backward() on any thread (nullptr removes it). The caller
// keeps it alive while installed.
void set_backward_observer(BackwardObserver* observer);

}  // namespace dg
