// Reverse-mode autograd as a tape. Every recorded op appends a node (inputs, output, backward
// closure) in execution order, which is already a topological order; backward() walks the tape
// in reverse and calls each closure with the gradient of that node's output.
//
// The backward contract (the same for every op): a backward computes the vector-Jacobian product
// for each input that requires grad and ADDS it into grad_of(input). Gradients of leaves
// accumulate across backward calls until zeroed; gradients of intermediates are freed as soon as
// their node has run (unless retain_grad is set). After each node runs, every input's gradient
// shape is checked against the input's shape; a mismatch names the op.
// This file does not define any op; see autograd/ops.h.
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

// The gradient buffer of `t`, created zero-filled and contiguous on first use. Kernels add into it.
Tensor grad_of(const Tensor& t);

// The gradient buffer of `t` for a kernel that writes every element of it. When `t` has no
// gradient yet, the buffer is created uninitialised and `fresh` is set: the caller must then
// overwrite all of it (e.g. GEMM with beta = 0) instead of adding. Saves a zero-fill pass and a
// read of zeros for the first (usually only) gradient contribution of an intermediate.
Tensor grad_for_write(const Tensor& t, bool& fresh);

// Where a backward kernel writes an input's gradient: the input's own gradient buffer when the
// kernel may write it in place (contiguous, and not also another input of the same call that
// requires grad — pass those as `others`), else a scratch buffer that finish() adds in. `fresh`:
// the buffer holds nothing yet, so the kernel writes it (e.g. GEMM beta = 0); kernels that can
// only add call zero_if_fresh() first.
struct GradSink {
  explicit GradSink(const Tensor& input, const std::vector<Tensor>& others = {});
  template <class T>
  T* data() const {
    return buffer.template data<T>();
  }
  // The GEMM beta that makes "buffer (+)= product" right: 0 overwrites a fresh buffer.
  template <class T>
  T beta() const {
    return fresh ? T(0) : T(1);
  }
  void zero_if_fresh();
  void finish() const;  // adds a scratch buffer into the input's gradient; nothing when direct
  Tensor input, buffer;
  bool direct = true;
  bool fresh = false;
};

// Adds `g` into grad_of(input), summing over the axes along which `input` was broadcast to g's shape.
// When `input` has no gradient yet and g is a contiguous buffer of input's shape that nothing
// else holds (a temporary of the backward, or the running node's own gradient or a full view of
// it, which the tape drops after the node), g itself becomes the gradient: no copy, no zeros.
void accumulate_grad(const Tensor& input, const Tensor& g);

// Runs the tape backward from `root`. With `grad_root` undefined, root must hold one element and
// its gradient is 1. Unless keep_graph is set, each node is dropped as soon as the walk has passed
// it (freeing the buffers its op saved for backward while the rest of the walk runs) and the tape
// is cleared afterwards.
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), bool keep_graph = false);

// Keeps the gradient of a non-leaf tensor after backward (for inspection and tests).
void retain_grad(const Tensor& t);

void clear_tape();
size_t tape_size();

}  // namespace dg
