// softmax, log_softmax and the losses built on them: cross_entropy over given logits (after its
// plain twin plain_cross_entropy) and linear_cross_entropy, the fused language-model head (kernels
// in tensor/kernels_loss.h). Each op validates its inputs (errors name the op and the offending
// tensor or target), runs its kernel on contiguous buffers and records a backward that adds into
// the inputs' gradients; forwards save per-row statistics only. Does not do: label smoothing, class
// weights, soft targets.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_loss.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// The mean of per-row losses [N] over `count` kept rows, summed in double row by row (a fixed
// order); NaN when every row was ignored, as torch.
template <class T>
T mean_loss(const T* losses, int64_t N, int64_t count) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return static_cast<T>(count ? total / static_cast<double>(count)
                              : std::numeric_limits<double>::quiet_NaN());
}

// Rows whose target is not ignore_index; throws naming `op` for a target outside [0, C).
int64_t count_targets(const int32_t* t, int64_t N, int64_t C, int32_t ignore_index,
                      const char* op) {
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == ignore_index) continue;
    if (t[n] < 0 || t[n] >= C)
      throw std::out_of_range(
          fmt::format("{}: target {} at row {} is out of range for {} classes (ignore_index {})",
                      op, t[n], n, C, ignore_index));
    ++count;
  }
  return count;
}
}  // namespace

// ---- softmax / log_softmax over one axis; backward from the saved output ------------------------
namespace {
Tensor softmax_impl(const Tensor& a, int64_t axis_in, bool log) {
  ScopedOpTimer op_timer(OpFamily::routing);
  const char* op = log ? "log_softmax" : "softmax";
  check_float(a, op);
  check_arg(a.dim() >= 1, op, a, "a tensor with at least one axis");
  const int64_t axis = normalize_axis(axis_in, a.dim(), op);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= a.shape()[k];
  for (int64_t k = axis + 1; k < a.dim(); ++k) inner *= a.shape()[k];
  const int64_t C = a.shape()[axis];
  Tensor x = a.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), op, [&]<class T>() {
    softmax_forward<T>(out.data<T>(), x.data<T>(), outer, C, inner, log);
  });
  if (should_record({a}))
    record(op, {a}, out, [a, out = detach(out), outer, C, inner, log, op](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(a.dtype(), op, [&]<class T>() {
        softmax_backward<T>(grad_ptr<T>(a, op), gc.data<T>(), out.data<T>(), outer, C, inner, log);
      });
    });
  return out;
}
}  // namespace

Tensor softmax(const Tensor& a, int64_t axis) { return softmax_impl(a, axis, false); }
Tensor log_softmax(const Tensor& a, int64_t axis) { return softmax_impl(a, axis, true); }

// ---- plain_cross_entropy: the loss as written (read this first) --------------------------------
// Every step is a primitive op on the tape, which therefore keeps x − m, its exponentials and
// log p [N, C]: what the fused cross_entropy below avoids (it saves lse [N] only).
Tensor plain_cross_entropy(const Tensor& logits, const Tensor& targets_in, int32_t ignore_index) {
  const char* op = "plain_cross_entropy";
  check_float(logits, op);
  check_arg(logits.dim() == 2, op, logits, "logits of shape [N, C]");
  const int64_t N = logits.size(0), C = logits.size(1);
  check_arg(
      targets_in.defined() && targets_in.dtype() == DType::i32 && targets_in.shape() == Shape{N},
      op, targets_in, fmt::format("int32 targets of shape [{}]", N));
  check_arg(N * C <= std::numeric_limits<int32_t>::max(), op, logits, "at most 2^31 − 1 logits");
  Tensor targets = targets_in.contiguous();
  const int32_t* t = targets.data<int32_t>();
  const int64_t count = count_targets(t, N, C, ignore_index, op);
  // m [N, 1]: each row's max, a constant (its gradient cancels in log p) that keeps exp finite
  Tensor x = logits.contiguous().to(DType::f64);
  std::vector<double> row_max(static_cast<size_t>(N), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      row_max[n] = c ? std::max(row_max[n], x.data<double>()[n * C + c]) : x.data<double>()[n * C];
  const Tensor m = Tensor::from_vector(row_max, {N, 1}, logits.dtype());
  const Tensor shifted = sub(logits, m);                                             // [N, C]
  const Tensor log_p = sub(shifted, log(sum(exp(shifted), {1}, /*keepdim=*/true)));  // [N, C]
  // gather log p[n, t[n]] of the kept rows: rows n·C + t[n] of log p viewed as [N·C, 1]
  std::vector<int32_t> picks;
  for (int64_t n = 0; n < N; ++n)
    if (t[n] != ignore_index) picks.push_back(static_cast<int32_t>(n * C + t[n]));
  const Tensor picked = embedding(reshape(log_p, {N * C, 1}), Tensor::from_ids(picks, {count}));
  return neg(mean(picked));  // [count, 1] -> scalar; 0/0 = NaN when every row is ignored
}

// ---- cross_entropy: mean over kept rows of lse − x[t]; backward (softmax − onehot)·g/count ------
Tensor cross_entropy(const Tensor& logits, const Tensor& targets_in, int32_t ignore_index) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "cross_entropy";
  check_float(logits, op);
  check_arg(logits.dim() == 2, op, logits, "logits of shape [N, C]");
  const int64_t N = logits.size(0), C = logits.size(1);
  check_arg(
      targets_in.defined() && targets_in.dtype() == DType::i32 && targets_in.shape() == Shape{N},
      op, targets_in, fmt::format("int32 targets of shape [{}]", N));
  Tensor targets = targets_in.contiguous();
  const int32_t* t = targets.data<int32_t>();
  const int64_t count = count_targets(t, N, C, ignore_index, op);
  Tensor x = logits.contiguous();
  Tensor lse = Tensor::empty({N}, logits.dtype());
  Tensor out = Tensor::empty({}, logits.dtype());
  dispatch_float(logits.dtype(), op, [&]<class T>() {
    Tensor losses = Tensor::empty({N}, logits.dtype());
    cross_entropy_forward<T>(losses.data<T>(), lse.data<T>(), x.data<T>(), t, N, C, ignore_index);
    out.data<T>()[0] = mean_loss(losses.data<T>(), N, count);
  });
  if (should_record({logits}))
    record(op, {logits}, out,
           [logits, x, lse, targets, N, C, ignore_index, count](const Tensor& g) {
             if (count == 0) {  // every target ignored: the gradient is zero (as torch)
               grad_of(logits);
               return;
             }
             const double scale = g.item() / static_cast<double>(count);
             dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>() {
               cross_entropy_backward<T>(grad_ptr<T>(logits, "cross_entropy"), x.data<T>(),
                                         lse.data<T>(), targets.data<int32_t>(),
                                         static_cast<T>(scale), N, C, ignore_index);
             });
           });
  return out;
}

// ---- plain_linear_cross_entropy: the head as written (read this first)
// The [N, V] logits exist as a tensor, and so does their gradient: what
// the fused op avoids.
Tensor plain_linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                                  int32_t ignore_index) {
  return cross_entropy(linear(x, weight), targets, ignore_index);
}

// ---- linear_cross_entropy: cross_entropy(x·Wᵀ) chunk by chunk; saves lse [N] ----------------
// The [N, V] logits and their gradient never exist: forward and backward each compute them one
// column chunk at a time into a pooled scratch buffer (tensor/kernels_loss.h); the backward
// recomputes them from x and W, which the model keeps anyway.
Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight, const Tensor& targets_in,
                            int32_t ignore_index) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const char* op = "linear_cross_entropy";
  check_float(x_in, op);
  check_float(weight, op);
  check_same_dtype(x_in, weight, op);
  check_arg(weight.dim() == 2 && weight.size(0) >= 1, op, weight,
            "a weight of shape [V, D] with V >= 1");
  const int64_t V = weight.size(0), D = weight.size(1);
  check_arg(x_in.dim() == 2 && x_in.size(1) == D, op, x_in,
            fmt::format("x of shape [N, {}] matching weight {}", D, weight.describe()));
  const int64_t N = x_in.size(0);
  check_arg(
      targets_in.defined() && targets_in.dtype() == DType::i32 && targets_in.shape() == Shape{N},
      op, targets_in, fmt::format("int32 targets of shape [{}]", N));
  Tensor targets = targets_in.contiguous();
  const int64_t count = count_targets(targets.data<int32_t>(), N, V, ignore_index, op);
  Tensor x = x_in.contiguous(), w = weight.contiguous();
  Tensor lse = Tensor::empty({N}, x.dtype());
  Tensor out = Tensor::empty({}, x.dtype());
  // One chunk covers a small vocabulary: its logits (at most kLmHeadScratch elements) are kept for
  // the backward instead of recomputed; larger vocabularies recompute chunk by chunk.
  const int64_t chunk = lm_head_chunk(N, V);
  const bool keep_logits = chunk >= V && should_record({x_in, weight});
  Tensor scratch = Tensor::empty({N * chunk}, x.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    Tensor losses = Tensor::empty({N}, x.dtype());
    lm_head_ce_forward<T>(losses.data<T>(), lse.data<T>(), x.data<T>(), w.data<T>(),
                          targets.data<int32_t>(), N, D, V, ignore_index, chunk, scratch.data<T>());
    out.data<T>()[0] = mean_loss(losses.data<T>(), N, count);
  });
  if (should_record({x_in, weight}))
    record(op, {x_in, weight}, out,
           [x_in, weight, x, w, lse, targets, N, D, V, ignore_index, count, chunk,
            kept = keep_logits ? scratch : Tensor(),
            kept_unused = std::make_shared<bool>(keep_logits)](const Tensor& g) {
             if (count == 0) {  // every target ignored: the gradients are zero (as torch)
               for (const Tensor& t : {x_in, weight})
                 if (t.requires_grad()) grad_of(t);
               return;
             }
             const double scale = g.item() / static_cast<double>(count);
             dispatch_float(x.dtype(), "linear_cross_entropy", [&]<class T>() {
               T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "linear_cross_entropy") : nullptr;
               T* dW =
                   weight.requires_grad() ? grad_ptr<T>(weight, "linear_cross_entropy") : nullptr;
               // the kept logits serve one backward (it overwrites them); a second one recomputes
               const bool use_kept = *kept_unused;
               *kept_unused = false;
               Tensor scratch = use_kept ? kept : Tensor::empty({N * chunk}, x.dtype());
               lm_head_ce_backward<T>(dx, dW, x.data<T>(), w.data<T>(), lse.data<T>(),
                                      targets.data<int32_t>(), static_cast<T>(scale), N, D, V,
                                      ignore_index, chunk, scratch.data<T>(), use_kept);
             });
           });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

std::vector<OpCase> loss_op_cases() {
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("x")}; };
  };
  return {
      {"softmax/last", one({3, 5}, 12, -2, 2), [](V in) { return softmax(in[0]); }},
      {"softmax/middle axis", one({2, 4, 3}, 13, -2, 2), [](V in) { return softmax(in[0], 1); }},
      {"log_softmax/last", one({3, 5}, 14, -2, 2), [](V in) { return log_softmax(in[0], -1); }},
      {"log_softmax/axis0", one({4, 2, 3}, 15, -2, 2), [](V in) { return log_softmax(in[0], 0); }},
      {"cross_entropy/some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({6, 5}, 16, -2, 2).set_name("logits"),
                                    Tensor::from_ids({2, -100, 0, 4, -100, 2}, {6})};
       },
       [](V in) { return cross_entropy(in[0], in[1]); }},
      {"cross_entropy/ignore_index 1",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 17, -2, 2).set_name("logits"),
                                    Tensor::from_ids({1, 0, 2, 1}, {4})};
       },
       [](V in) { return cross_entropy(in[0], in[1], 1); }},
      {"plain_cross_entropy/some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({6, 5}, 16, -2, 2).set_name("logits"),
                                    Tensor::from_ids({2, -100, 0, 4, -100, 2}, {6})};
       },
       [](V in) { return plain_cross_entropy(in[0], in[1]); }},
      // One column chunk at these sizes; tests/test_kernels_loss.cpp checks the kernels with
      // several chunks (and a remainder) against the plain reference.
      {"linear_cross_entropy/some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 24, -1.5, 1.5).set_name("x"),
                                    random_tensor({37, 4}, 25, -1.5, 1.5).set_name("W"),
                                    Tensor::from_ids({36, -100, 0, 17, 5}, {5})};
       },
       [](V in) { return linear_cross_entropy(in[0], in[1], in[2]); }},
      {"linear_cross_entropy/tied W, ignore_index 3",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 26, -2, 2).set_name("x"),
                                    random_tensor({6, 3}, 27, -2, 2).set_name("W"),
                                    Tensor::from_ids({3, 0, 5, 3}, {4})};
       },
       [](V in) { return linear_cross_entropy(in[0], in[1], in[2], 3); }},
  };
}

}  // namespace dg
