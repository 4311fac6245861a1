// Reverse-mode autograd as a tape. Every recorded op appends a node (inputs, output, backward
// closure) in execution order, which is already a topological order; backward() walks the tape
// in reverse and calls each closure with the gradient of that node's output.
//
// The backward contract (the same for every op): a backward computes the vector-Jacobian product
// for each input that requires grad and adds it into that input's gradient, in one of the two
// ways written down below with the ownership rules. After each node runs, every input's
// gradient shape is checked against the input's shape; a mismatch names the op.
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

// ---- Writing a gradient: the one contract, and who owns which buffer ------------------------
// A backward receives g, the gradient of its op's output, reads it and never writes it. For each
// input that requires grad it then does ONE of two things:
//
//   accumulate into this   accumulate_grad(input, t) adds t (any layout; summed over the axes
//                          along which input was broadcast), or a kernel adds straight into
//                          grad_of(input), the input's own buffer, created zero-filled.
//   write all of this      GradSink sink(input, {the op's other inputs}) hands a kernel one
//                          contiguous buffer of input's shape to fill with
//                              buffer = (sink.fresh ? 0 : buffer) + vector-Jacobian product
//                          (GEMM beta = sink.beta<T>(); a kernel that can only add calls
//                          sink.zero_if_fresh() first), then sink.finish().
//
// Both end in the same place: grad(input) += the op's contribution. The second only saves the
// zero-fill and the read of zeros for the first (usually only) contribution of an intermediate.
//
// Ownership rules. tape.cpp enforces them; tests/test_tape.cpp checks each one.
//  1. A gradient buffer belongs to one tensor. Two tensors' gradients never share memory, and
//     no gradient shares memory with a tensor the caller can still see: backward() copies
//     grad_root; accumulate_grad takes t over as the gradient (no copy, no zeros) only when input
//     has no gradient yet and nothing else can see t — a temporary of the backward, or g itself
//     or a full view of it (the tape drops g when the node returns), g at most once per node.
//     Anything else is added in. A tensor handed to two inputs is therefore taken by the first
//     and added into the second's own buffer. A backward that hands over g itself does so after
//     its last read of g (linear_add: g may become the residual's gradient, and when the
//     residual is also x, x's gradient is then written in that same buffer).
//  2. One tensor passed as several inputs of an op (add(x, x), attention_heads(q, q, q)) gets
//     the sum of all its contributions. accumulate_grad and grad_of get this for free; GradSink
//     needs the op's other inputs so that a repeated input writes a scratch buffer that
//     finish() adds in (a direct buffer would be overwritten by the second contribution).
//  3. A gradient installed with Tensor::set_grad (e.g. a view into a flat parameter-gradient
//     buffer) is added into and never replaced; a strided one goes through GradSink's scratch
//     or accumulate_grad (kernels that add through a raw pointer need it contiguous and say so).
//  4. Leaves' gradients accumulate across backward() calls until zeroed. Non-leaves' gradients
//     are dropped as soon as their node has run, unless retain_grad(t); a retained gradient is
//     never taken over by a later node.
//  5. keep_graph keeps every node (and what it saved) for another backward(); the second walk
//     adds the same contributions again.

// The gradient buffer of `t` (accumulate into this): created zero-filled and contiguous on first
// use, or whatever set_grad installed.
Tensor grad_of(const Tensor& t);

// Adds `g` into t's gradient (accumulate into this), summing over the axes along which `input`
// was broadcast to g's shape; takes g over instead when rule 1 allows.
void accumulate_grad(const Tensor& input, const Tensor& g);

// Where a backward kernel writes all of an input's gradient (write all of this): the input's own
// gradient buffer when it may be written in place (contiguous, and `input` is not also one of
// `others` that requires grad — pass the op's other inputs), else a scratch buffer that finish()
// adds in. `fresh`: the buffer holds nothing yet, so the kernel writes it instead of adding.
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
  void zero_if_fresh();  // for kernels that can only add: a fresh buffer becomes zeros
  void finish() const;   // adds a scratch buffer into the input's gradient; nothing when direct
  Tensor input, buffer;
  bool direct = true;
  bool fresh = false;
};

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
