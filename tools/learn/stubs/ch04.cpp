// Chapter 4 of the learner's path (autograd/learn-04-reductions-softmax.md): your versions of
// three library functions. Replace each body with your own; `make learn CHAPTER=4` builds this
// file into the chapter's program, where it replaces the library's function everywhere the
// library calls it, and grades it. The declarations, with what each function must do, are in
// autograd/op_steps.h. Write reduce_backward first: softmax's recorded backward and
// plain_cross_entropy use sum, so their checks run your reduce_backward too.
#include "autograd/op_steps.h"
#include "autograd/ops.h"   // reshape, scale, expand, sub, mul, exp, log, sum
#include "autograd/tape.h"  // detach
#include "tools/learn/grade.h"

namespace dg {

Tensor reduce_backward(const Tensor& g, const Shape& input_shape, const std::vector<int64_t>& axes,
                       bool average) {
  dg::learn::not_written("reduce_backward");
}

Tensor softmax_input_grad(const Tensor& g, const Tensor& out, int64_t axis, bool log) {
  dg::learn::not_written("softmax_input_grad");
}

Tensor plain_log_softmax_rows(const Tensor& logits) {
  dg::learn::not_written("plain_log_softmax_rows");
}

}  // namespace dg
