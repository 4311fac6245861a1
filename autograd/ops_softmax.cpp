// softmax and log_softmax over one axis: the forward kernel, a backward from the saved output
// (tensor/kernels_softmax.h), and their gradient-check rows. The losses built on them are in
// ops_loss.cpp. Does not do: masked or temperature softmax (compose them: masked_fill, scale).
// create_graph (autograd/tape.h): both support it, through a second backward from recorded ops
// that uses the output with its graph.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them; their second derivatives
// tests/test_gradgradcheck_pointwise.cpp), the kernels (beside the cross-entropy ones) and
// softmax's values in tests/test_kernels_loss.cpp.
#include "autograd/op_steps.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/kernels_softmax.h"
#include "tensor/profile.h"

namespace dg {

// ---- softmax / log_softmax over one axis; backward from the saved output ------------------------
// softmax g_in = y⊙(g − Σ g⊙y); log_softmax g_in = g − e^y·Σ g (sums over axis, kept as size 1)
DG_EXERCISE Tensor softmax_input_grad(const Tensor& g, const Tensor& out, int64_t axis, bool log) {
  if (log) return sub(g, mul(exp(out), sum(g, {axis}, true)));
  return mul(out, sub(g, sum(mul(g, out), {axis}, true)));
}

namespace {
Tensor softmax_impl(const Tensor& a, int64_t axis_in, bool log) {
  ScopedOpTimer op_timer(OpFamily::mixing);
  const char* op = log ? "log_softmax" : "softmax";
  check_float(a, op);
  check_arg(a.dim() >= 1, op, a, "a tensor with at least one axis");
  const int64_t axis = normalize_axis(axis_in, a.dim(), op);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= a.shape()[k];
  for (int64_t k = axis + 1; k < a.dim(); ++k) inner *= a.shape()[k];
  const int64_t C = a.shape()[axis];
  Tensor x = kernel_input(a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    softmax_forward<T>(out.data<T>(), x.data<T>(), outer, C, inner, log);
  });
  if (tracing()) trace_op(op, {a}, {out}, {{"axis", axis}});
  if (should_record({a}))
    record(op, {a}, out,
           [a, out = detach(out), outer, C, inner, log, op](const Tensor& g) {
             Tensor gc = g.contiguous();
             dispatch_float(a.dtype(), op, [&]<class T>() {
               softmax_backward<T>(grad_ptr<T>(a, op), gc.data<T>(), out.data<T>(), outer, C, inner,
                                   log);
             });
           })
        .saves({out})
        .differentiable([a, axis, log](const Tensor& g, const Tensor& out) {
          accumulate_grad(a, softmax_input_grad(g, out, axis, log));  // out with its graph
        });
  return out;
}
}  // namespace

Tensor softmax(const Tensor& a, int64_t axis) { return softmax_impl(a, axis, false); }
Tensor log_softmax(const Tensor& a, int64_t axis) { return softmax_impl(a, axis, true); }

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the softmax family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> softmax_op_cases() {
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("x")}; };
  };
  return {
      {"softmax/last", one({3, 5}, 12, -2, 2), [](V in) { return softmax(in[0]); }},
      {"softmax/middle axis", one({2, 4, 3}, 13, -2, 2), [](V in) { return softmax(in[0], 1); }},
      {"log_softmax/last", one({3, 5}, 14, -2, 2), [](V in) { return log_softmax(in[0], -1); }},
      {"log_softmax/axis0", one({4, 2, 3}, 15, -2, 2), [](V in) { return log_softmax(in[0], 0); }},
  };
}

}  // namespace dg
