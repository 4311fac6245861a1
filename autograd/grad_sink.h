// For the built-in fast kernels only: writing an input's gradient without the zero-fill and the
// temporary that accumulate_grad (autograd/tape.h) costs, and the ownership rules all gradient
// writing follows. A new op never needs this file; it calls accumulate_grad and stops there.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "autograd/tape.h"
#include "tensor/tensor.h"

namespace dg {

// Two shortcuts, each ending where accumulate_grad ends (grad(input) += the op's contribution):
//
//   add into this     grad_ptr<T>(input, op) is input's own contiguous gradient buffer, created
//                     zero-filled on first use; a kernel adds its product straight into it.
//   write all of it   GradSink sink(input, {the op's other inputs}) hands a kernel one
//                     contiguous buffer of input's shape to fill with
//                         buffer = (sink.fresh ? 0 : buffer) + vector-Jacobian product
//                     (GEMM beta = sink.beta<T>(); a kernel that can only add calls
//                     sink.zero_if_fresh() first), then sink.finish(). It saves the zero-fill and
//                     the read of zeros for the first (usually only) contribution of a tensor.
//
// Ownership rules. tape.cpp and grad_sink.cpp enforce them; tests/test_tape.cpp checks each one.
//  1. A gradient buffer belongs to one tensor. Two tensors' gradients never share memory, and
//     no gradient shares memory with a tensor the caller can still see: backward() copies
//     grad_root; accumulate_grad takes t over as the gradient (no copy, no zeros) only when input
//     has no gradient yet and nothing else can see t — a temporary of the backward, or g itself
//     or a full view of it (the walk drops g when the node returns), g at most once per node.
//     Anything else is added in. A tensor handed to two inputs is therefore taken by the first
//     and added into the second's own buffer. A backward that hands over g itself does so after
//     its last read of g (linear_add: g may become the residual's gradient, and when the
//     residual is also x, x's gradient is then written in that same buffer).
//  2. One tensor passed as several inputs of an op (add(x, x), attention_heads(q, q, q)) gets
//     the sum of all its contributions. accumulate_grad and grad_ptr get this for free; GradSink
//     needs the op's other inputs so that a repeated input writes a scratch buffer that
//     finish() adds in (a direct buffer would be overwritten by the second contribution).
//  3. A gradient installed with Tensor::set_grad (e.g. a view into a flat parameter-gradient
//     buffer) is added into and never replaced; a strided one goes through GradSink's scratch
//     or accumulate_grad (grad_ptr refuses it, naming the op).
//  4. Leaves' gradients accumulate across backward() calls until zeroed. Non-leaves' gradients
//     are dropped as soon as their node has run, unless retain_grad(t); a retained gradient is
//     never taken over by a later node.
//  5. keep_graph keeps every node it runs (and what it saved) for another backward(); the
//     second walk adds the same contributions again. Without it, a second walk through a freed
//     node throws, naming its op, before any gradient changes.

// The gradient of `t`: created zero-filled and contiguous on first use, or whatever set_grad
// installed (possibly strided).
Tensor grad_of(const Tensor& t);

// The contiguous gradient buffer of t that a kernel adds into (add into this). A strided
// gradient installed by set_grad is refused naming the op (rule 3).
template <class T>
T* grad_ptr(const Tensor& t, const char* op) {
  Tensor g = grad_of(t);
  if (!g.is_contiguous())
    throw std::logic_error(
        fmt::format("{}: the gradient of {} is not contiguous", op, t.describe()));
  return g.data<T>();
}

// Where a backward kernel writes all of an input's gradient (write all of it): the input's own
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

}  // namespace dg
