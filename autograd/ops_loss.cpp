// The losses: cross_entropy over given logits with optional label smoothing (after its plain
// twin plain_cross_entropy), linear_cross_entropy (the fused language-model head; kernels in
// tensor/kernels_loss.h), nll_loss and the pointwise losses (mse, l1, binary cross-entropy with
// logits) with torch's reductions. softmax and log_softmax are in ops_softmax.cpp. Each op
// validates its inputs (errors name the op and the offending tensor or target) and records a
// backward that adds into the inputs' gradients. Under create_graph (autograd/tape.h)
// cross_entropy ((softmax − target distribution)·row scale, softmax recorded), nll_loss, mse_loss,
// l1_loss and binary_cross_entropy_with_logits run a recorded backward with the same conventions
// (reductions, ignore_index, label smoothing, pos_weight); plain_cross_entropy is a composition;
// linear_cross_entropy refuses. Does not do: class weights, soft targets, K-dimensional targets.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the kernels in
// tests/test_kernels_loss.cpp, the reductions in tests/test_losses.cpp, the plain twins in
// tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/op_steps.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
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

// Reduction::batchmean is kl_div's (torch accepts 'batchmean' only there).
void check_reduction(Reduction reduction, const char* op) {
  if (reduction == Reduction::batchmean)
    throw std::invalid_argument(fmt::format(
        "{}: reduction batchmean is kl_div's only (as torch); use Reduction::mean, sum or none",
        op));
}

void check_smoothing(double eps, const char* op) {
  if (!(eps >= 0.0 && eps <= 1.0))
    throw std::invalid_argument(
        fmt::format("{}: label_smoothing must be in [0, 1], got {}", op, eps));
}

// Rows whose target is not ignore_index; throws naming `op` for a target outside [0, C).
template <class I>
int64_t count_targets(const I* t, int64_t N, int64_t C, int64_t ignore_index, const char* op) {
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

// int64 or int32 targets of shape [N] (checked), contiguous, read in place by the kernels.
Tensor checked_targets(const Tensor& targets, int64_t N, const char* op) {
  check_arg(targets.defined() && (targets.dtype() == DType::i64 || targets.dtype() == DType::i32) &&
                targets.shape() == Shape{N},
            op, targets, fmt::format("int64 or int32 targets of shape [{}]", N));
  return kernel_input(targets);
}

// The reduced loss from per-row losses [N] (0 at ignored rows) over `count` kept rows: mean
// divides their sum by count (NaN when 0), sum is the sum, none the rows themselves.
template <class T>
void reduce_rows(T* out, const T* losses, int64_t N, int64_t count, Reduction reduction) {
  if (reduction == Reduction::none) std::copy(losses, losses + N, out);
  if (reduction == Reduction::mean) out[0] = mean_loss(losses, N, count);
  if (reduction == Reduction::sum) out[0] = mean_loss(losses, N, 1);  // the sum
}

// The per-row gradient scale of a loss over rows, as a constant [N, 1]: 0 at ignored rows, 1/count
// at kept ones for mean (0 when none is kept), 1 for sum and none. targets are int64 or int32.
std::vector<double> row_scales(const Tensor& targets, int64_t N, int64_t count,
                               int64_t ignore_index, Reduction reduction, const char* op) {
  const double kept = reduction != Reduction::mean ? 1.0
                      : count                      ? 1.0 / static_cast<double>(count)
                                                   : 0.0;
  std::vector<double> s(static_cast<size_t>(N), 0.0);
  dispatch_index(targets, op, "targets", [&]<class I>() {
    for (int64_t n = 0; n < N; ++n)
      if (targets.data<I>()[n] != ignore_index) s[n] = kept;
  });
  return s;
}

// g as a factor of the per-row gradient: [N, 1] for reduction none, the scalar itself otherwise.
Tensor row_factor(const Tensor& g, int64_t N, Reduction reduction) {
  return reduction == Reduction::none ? reshape(g, {N, 1}) : g;
}
}  // namespace

// ---- plain_cross_entropy: the loss as written (read this first) --------------------------------
// log p [N, C] = (x − m) − log Σ_c exp(x − m), m [N, 1] each row's max: a constant (its gradient
// cancels in log p) that keeps every exp of a value ≤ 0, so finite for any finite logits.
DG_EXERCISE Tensor plain_log_softmax_rows(const Tensor& logits) {
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor x = detach(logits).contiguous().to(DType::f64);
  std::vector<double> row_max(static_cast<size_t>(N), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      row_max[n] = c ? std::max(row_max[n], x.data<double>()[n * C + c]) : x.data<double>()[n * C];
  const Tensor m = Tensor::from_vector(row_max, {N, 1}, logits.dtype());
  const Tensor shifted = sub(logits, m);                               // [N, C]
  return sub(shifted, log(sum(exp(shifted), {1}, /*keepdim=*/true)));  // [N, C]
}

// Every step is a primitive op on the tape, which therefore keeps x − m, its exponentials and
// log p [N, C]: what the fused cross_entropy below avoids (it saves lse [N] only).
Tensor plain_cross_entropy(const Tensor& logits, const Tensor& targets_in, Reduction reduction,
                           int64_t ignore_index, double label_smoothing) {
  const char* op = "plain_cross_entropy";
  check_float(logits, op);
  check_smoothing(label_smoothing, op);
  check_reduction(reduction, op);
  check_arg(logits.dim() == 2, op, logits, "logits of shape [N, C]");
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor targets = checked_targets(targets_in, N, op).to(DType::i64);
  const int64_t* t = targets.data<int64_t>();
  const int64_t count = count_targets(t, N, C, ignore_index, op);
  const Tensor log_p = plain_log_softmax_rows(logits);  // [N, C]
  // constants: onehot[n, c] = 1 at c = t[n] and kept[n] = 1 for rows not ignored (else 0)
  std::vector<double> onehot(static_cast<size_t>(N * C), 0.0), kept(static_cast<size_t>(N), 0.0);
  for (int64_t n = 0; n < N; ++n)
    if (t[n] != ignore_index) {
      onehot[n * C + t[n]] = 1.0;
      kept[n] = 1.0;
    }
  // loss[n] = −Σ_c onehot[n, c]·log p[n, c] = −log p[n, t[n]] (0 at ignored rows)
  Tensor rows = neg(sum(mul(log_p, Tensor::from_vector(onehot, {N, C}, logits.dtype())), {1}));
  if (label_smoothing != 0.0) {
    // (1 − ε)·loss[n] + ε·mean over classes of −log p[n, c], at kept rows only
    const Tensor uniform =
        scale(sum(mul(log_p, Tensor::from_vector(kept, {N, 1}, logits.dtype())), {1}),
              -1.0 / static_cast<double>(C));
    rows = add(scale(rows, 1.0 - label_smoothing), scale(uniform, label_smoothing));
  }
  if (reduction == Reduction::none) return rows;  // [N]
  if (reduction == Reduction::sum) return sum(rows);
  if (count == 0)  // every target ignored: NaN and a zero gradient, as the fused op (and torch)
    return add_scalar(scale(sum(rows), 0.0), std::numeric_limits<double>::quiet_NaN());
  return scale(sum(rows), 1.0 / static_cast<double>(count));
}

// ---- cross_entropy: lse − x[t] per kept row, reduced; backward (softmax − onehot)·g ------------
// With label smoothing ε > 0 the smoothed kernels run instead (the ε = 0 path is unchanged).
// mean scales the backward by g/count, sum by g, none by g[n] row by row.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets_in, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "cross_entropy";
  check_float(logits, op);
  check_smoothing(label_smoothing, op);
  check_reduction(reduction, op);
  const double eps = label_smoothing;
  check_arg(logits.dim() == 2, op, logits, "logits of shape [N, C]");
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor targets = checked_targets(targets_in, N, op);
  Tensor x = kernel_input(logits);
  Tensor lse = Tensor::empty({N}, logits.dtype());
  Tensor out = Tensor::empty(reduction == Reduction::none ? Shape{N} : Shape{}, logits.dtype());
  const int64_t count = dispatch_index(targets, op, "targets", [&]<class I>() {
    const I* t = targets.data<I>();
    const int64_t count = count_targets(t, N, C, ignore_index, op);
    dispatch_float(logits.dtype(), op, [&]<class T>() {
      Tensor losses = Tensor::empty({N}, logits.dtype());
      if (eps == 0.0)
        cross_entropy_forward<T>(losses.data<T>(), lse.data<T>(), x.data<T>(), t, N, C,
                                 ignore_index);
      else
        cross_entropy_smoothed_forward<T>(losses.data<T>(), lse.data<T>(), x.data<T>(), t, N, C,
                                          ignore_index, eps);
      reduce_rows(out.data<T>(), losses.data<T>(), N, count, reduction);
    });
    return count;
  });
  if (should_record({logits}))
    record(op, {logits}, out,
           [logits, x, lse, targets, N, C, ignore_index, count, eps, reduction](const Tensor& g) {
             if (count == 0) {  // every target ignored: the gradient is zero (as torch)
               grad_of(logits);
               return;
             }
             Tensor gc = g.contiguous();
             dispatch_index(targets, "cross_entropy", "targets", [&]<class I>() {
               dispatch_float(logits.dtype(), "cross_entropy", [&]<class T>() {
                 T* dl = grad_ptr<T>(logits, "cross_entropy");
                 const I* t = targets.data<I>();
                 // rows [n0, n0 + rows) scaled by s: all rows at once, or one row at a time (none)
                 auto run = [&](int64_t n0, int64_t rows, double s) {
                   if (eps == 0.0)
                     cross_entropy_backward<T>(dl + n0 * C, x.data<T>() + n0 * C,
                                               lse.data<T>() + n0, t + n0, static_cast<T>(s), rows,
                                               C, ignore_index);
                   else
                     cross_entropy_smoothed_backward<T>(
                         dl + n0 * C, x.data<T>() + n0 * C, lse.data<T>() + n0, t + n0,
                         static_cast<T>(s), rows, C, ignore_index, eps);
                 };
                 if (reduction == Reduction::mean)
                   run(0, N, static_cast<double>(gc.data<T>()[0]) / static_cast<double>(count));
                 else if (reduction == Reduction::sum)
                   run(0, N, static_cast<double>(gc.data<T>()[0]));
                 else
                   for (int64_t n = 0; n < N; ++n) run(n, 1, static_cast<double>(gc.data<T>()[n]));
               });
             });
           })
        .differentiable([logits, targets, N, C, ignore_index, count, eps, reduction](
                            const Tensor& g, const Tensor&) {
          // (softmax(x) − q)·s·g per row, q = (1 − ε)·onehot + ε/C the target distribution and s
          // the row's scale (0 at ignored rows): softmax recorded, q and s constants
          std::vector<double> s =
              row_scales(targets, N, count, ignore_index, reduction, "cross_entropy");
          std::vector<double> q(static_cast<size_t>(N * C), 0.0);
          dispatch_index(targets, "cross_entropy", "targets", [&]<class I>() {
            for (int64_t n = 0; n < N; ++n) {
              const I t = targets.data<I>()[n];
              if (t == ignore_index) continue;
              for (int64_t c = 0; c < C; ++c)
                q[n * C + c] = -(eps / static_cast<double>(C) + (c == t ? 1.0 - eps : 0.0));
            }
          });
          const Tensor diff =
              add(softmax(logits, -1), Tensor::from_vector(q, {N, C}, logits.dtype()));
          const Tensor rows =
              mul(Tensor::from_vector(s, {N, 1}, logits.dtype()), row_factor(g, N, reduction));
          accumulate_grad(logits, mul(diff, rows));
        });
  return out;
}

// ---- plain_linear_cross_entropy: the head as written (read this first)
// The [N, V] logits exist as a tensor, and so does their gradient: what
// the fused op avoids.
Tensor plain_linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                                  Reduction reduction, int64_t ignore_index) {
  return cross_entropy(linear(x, weight), targets, reduction, ignore_index);
}

// ---- linear_cross_entropy: cross_entropy(x·Wᵀ) chunk by chunk; saves lse [N] ----------------
// The [N, V] logits and their gradient never exist: forward and backward each compute them one
// column chunk at a time into a pooled scratch buffer (tensor/kernels_loss.h); the backward
// recomputes them from x and W, which the model keeps anyway. mean and sum scale the backward
// by one number; none (a gradient per row) is refused, see ops.h.
Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight, const Tensor& targets_in,
                            Reduction reduction, int64_t ignore_index) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const char* op = "linear_cross_entropy";
  check_reduction(reduction, op);
  check_float(x_in, op);
  check_float(weight, op);
  check_same_dtype(x_in, weight, op);
  if (reduction == Reduction::none)
    throw std::invalid_argument(
        "linear_cross_entropy: reduction none is not supported (a loss per row needs the logits' "
        "gradient row by row); use cross_entropy(linear(x, weight), targets, Reduction::none)");
  check_arg(weight.dim() == 2 && weight.size(0) >= 1, op, weight,
            "a weight of shape [V, D] with V >= 1");
  const int64_t V = weight.size(0), D = weight.size(1);
  check_arg(x_in.dim() == 2 && x_in.size(1) == D, op, x_in,
            fmt::format("x of shape [N, {}] matching weight {}", D, weight.describe()));
  const int64_t N = x_in.size(0);
  Tensor targets = checked_targets(targets_in, N, op);
  Tensor x = kernel_input(x_in), w = kernel_input(weight);
  Tensor lse = Tensor::empty({N}, x.dtype());
  Tensor out = Tensor::empty({}, x.dtype());
  // One chunk covers a small vocabulary: its logits (at most kLmHeadScratch elements) are kept for
  // the backward instead of recomputed; larger vocabularies recompute chunk by chunk.
  const int64_t chunk = lm_head_chunk(N, V);
  const bool keep_logits = chunk >= V && should_record({x_in, weight});
  Tensor scratch = Tensor::empty({N * chunk}, x.dtype());
  const int64_t count = dispatch_index(targets, op, "targets", [&]<class I>() {
    const I* t = targets.data<I>();
    const int64_t count = count_targets(t, N, V, ignore_index, op);
    dispatch_float(x.dtype(), op, [&]<class T>() {
      Tensor losses = Tensor::empty({N}, x.dtype());
      lm_head_ce_forward<T>(losses.data<T>(), lse.data<T>(), x.data<T>(), w.data<T>(), t, N, D, V,
                            ignore_index, chunk, scratch.data<T>());
      reduce_rows(out.data<T>(), losses.data<T>(), N, count, reduction);
    });
    return count;
  });
  if (should_record({x_in, weight}))
    record(op, {x_in, weight}, out,
           [x_in, weight, x, w, lse, targets, N, D, V, ignore_index, count, chunk, reduction,
            kept = keep_logits ? scratch : Tensor(),
            kept_unused = std::make_shared<bool>(keep_logits)](const Tensor& g) {
             if (count == 0) {  // every target ignored: the gradients are zero (as torch)
               for (const Tensor& t : {x_in, weight})
                 if (t.requires_grad()) grad_of(t);
               return;
             }
             const double scale =
                 reduction == Reduction::mean ? g.item() / static_cast<double>(count) : g.item();
             dispatch_index(targets, "linear_cross_entropy", "targets", [&]<class I>() {
               dispatch_float(x.dtype(), "linear_cross_entropy", [&]<class T>() {
                 T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "linear_cross_entropy") : nullptr;
                 T* dW =
                     weight.requires_grad() ? grad_ptr<T>(weight, "linear_cross_entropy") : nullptr;
                 // the kept logits serve one backward (it overwrites them); a second one
                 // recomputes
                 const bool use_kept = *kept_unused;
                 *kept_unused = false;
                 Tensor scratch = use_kept ? kept : Tensor::empty({N * chunk}, x.dtype());
                 lm_head_ce_backward<T>(dx, dW, x.data<T>(), w.data<T>(), lse.data<T>(),
                                        targets.data<I>(), static_cast<T>(scale), N, D, V,
                                        ignore_index, chunk, scratch.data<T>(), use_kept);
               });
             });
           });
  return out;
}

// ---- pointwise losses with a reduction: mse_loss, l1_loss, binary_cross_entropy_with_logits -----
namespace {
// Reduces the elementwise losses l(x_k, y_k) over input and target of one shape; the backward
// calls `f` again for ∂l/∂x and ∂l/∂y. f(x, y, k) -> {l, ∂l/∂x, ∂l/∂y}, in double. Sums run in
// double, serially in element order (the same bits at any thread count).
struct PointLoss {
  double loss, dx, dy;
};
// ∂l/∂x and ∂l/∂y as recorded ops of x and y (for create_graph): (x, y) -> [x's shape].
struct PointLossGrads {
  std::function<Tensor(const Tensor&, const Tensor&)> dx, dy;
};
template <class F>
Tensor pointwise_loss(const char* op, const Tensor& input, const Tensor& target,
                      Reduction reduction, F f, PointLossGrads grads) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_reduction(reduction, op);
  check_float(input, op);
  check_float(target, op);
  check_same_dtype(input, target, op);
  check_arg(target.shape() == input.shape(), op, target,
            fmt::format("a target of the input's shape {}", shape_str(input.shape())));
  Tensor x = kernel_input(input), y = kernel_input(target);
  const int64_t n = x.numel();
  Tensor out = Tensor::empty(reduction == Reduction::none ? input.shape() : Shape{}, input.dtype());
  dispatch_float(input.dtype(), op, [&]<class T>() {
    const T *xs = x.data<T>(), *ys = y.data<T>();
    T* o = out.data<T>();
    double total = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      const double l = f(xs[k], ys[k], k).loss;
      if (reduction == Reduction::none)
        o[k] = static_cast<T>(l);
      else
        total += l;
    }
    if (reduction == Reduction::sum) o[0] = static_cast<T>(total);
    if (reduction == Reduction::mean)  // 0/0 = NaN for no elements, as torch
      o[0] = static_cast<T>(n ? total / static_cast<double>(n)
                              : std::numeric_limits<double>::quiet_NaN());
  });
  if (should_record({input, target}))
    record(op, {input, target}, out, [input, target, x, y, n, reduction, f, op](const Tensor& g) {
      Tensor gc = g.contiguous();
      Tensor tx = Tensor::empty(input.shape(), input.dtype());
      Tensor ty = Tensor::empty(input.shape(), input.dtype());
      dispatch_float(input.dtype(), op, [&]<class T>() {
        const T *xs = x.data<T>(), *ys = y.data<T>(), *gs = gc.data<T>();
        const double s = reduction == Reduction::none  ? 1.0
                         : reduction == Reduction::sum ? static_cast<double>(gs[0])
                                                       : static_cast<double>(gs[0]) / n;
        for (int64_t k = 0; k < n; ++k) {
          const PointLoss d = f(xs[k], ys[k], k);
          const double gk = reduction == Reduction::none ? static_cast<double>(gs[k]) : s;
          tx.data<T>()[k] = static_cast<T>(gk * d.dx);
          ty.data<T>()[k] = static_cast<T>(gk * d.dy);
        }
      });
      if (input.requires_grad()) accumulate_grad(input, tx);
      if (target.requires_grad()) accumulate_grad(target, ty);
    }).differentiable([input, target, n, reduction, grads](const Tensor& g, const Tensor&) {
      // g·∂l/∂x, g·∂l/∂y (g broadcast from a scalar for sum, g/n for mean)
      const Tensor gk = reduction == Reduction::mean ? scale(g, 1.0 / static_cast<double>(n)) : g;
      if (input.requires_grad()) accumulate_grad(input, mul(gk, grads.dx(input, target)));
      if (target.requires_grad()) accumulate_grad(target, mul(gk, grads.dy(input, target)));
    });
  return out;
}
}  // namespace

// l = (x − y)²; ∂l/∂x = 2(x − y) = −∂l/∂y.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return pointwise_loss(
      "mse_loss", input, target, reduction,
      [](double x, double y, int64_t) {
        return PointLoss{(x - y) * (x - y), 2 * (x - y), -2 * (x - y)};
      },
      {[](const Tensor& x, const Tensor& y) { return scale(add(x, scale(y, -1.0)), 2.0); },
       [](const Tensor& x, const Tensor& y) { return scale(add(x, scale(y, -1.0)), -2.0); }});
}

// l = |x − y|; ∂l/∂x = sign(x − y) (0 at x = y, as torch) = −∂l/∂y.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  // sign(x − y) from comparisons: a constant (its derivative is 0 away from x = y)
  auto sign = [](const Tensor& x, const Tensor& y) {
    return sub(to_dtype(gt(x, y), x.dtype()), to_dtype(lt(x, y), x.dtype()));
  };
  return pointwise_loss("l1_loss", input, target, reduction,
                        [](double x, double y, int64_t) {
                          const double sign = x > y ? 1.0 : x < y ? -1.0 : 0.0;
                          return PointLoss{std::fabs(x - y), sign, -sign};
                        },
                        {sign, [sign](const Tensor& x, const Tensor& y) { return sign(y, x); }});
}

// With w = 1 + (pw − 1)·y (w = 1 without pos_weight) and softplus(−x) = max(−x, 0) + log1p(e^−|x|):
// l = (1 − y)·x + w·softplus(−x); ∂l/∂x = (1 − y) − w·σ(−x); ∂l/∂y = −x + (pw − 1)·softplus(−x).
// Without pos_weight that is max(x, 0) − x·y + log1p(e^−|x|), ∂l/∂x = σ(x) − y.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction, const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  std::vector<double> pw;
  if (pos_weight.defined()) {
    check_float(pos_weight, op);
    check_arg(!pos_weight.requires_grad(), op, pos_weight,
              "a pos_weight that does not require grad (it is a constant here)");
    const int64_t C = input.dim() ? input.size(-1) : 1;
    check_arg(pos_weight.numel() == 1 || (pos_weight.dim() == 1 && pos_weight.numel() == C), op,
              pos_weight, fmt::format("a pos_weight of shape [{}] or [1]", C));
    pw = pos_weight.to_vector();
  }
  // recorded (create_graph): pw − 1 a constant [C] or [1] broadcast over x's last axis (0 without
  // pos_weight), w = 1 + (pw − 1)·y, ∂l/∂x = (1 − y) − w·sigmoid(−x), ∂l/∂y = −x + (pw − 1)·
  // softplus(−x)
  std::vector<double> pw_minus_1;
  for (double p : pw) pw_minus_1.push_back(p - 1.0);
  if (pw.empty()) pw_minus_1.push_back(0.0);
  // made only when a recorded backward runs: the forward allocates nothing more
  auto pwm1 = [pw_minus_1](const Tensor& x) {
    return Tensor::from_vector(pw_minus_1, {static_cast<int64_t>(pw_minus_1.size())}, x.dtype());
  };
  PointLossGrads grads{[pwm1](const Tensor& x, const Tensor& y) {
                         const Tensor one = Tensor::full({}, 1.0, y.dtype());
                         const Tensor w = add(mul(y, pwm1(x)), one);  // 1 + (pw − 1)·y
                         return add(add(scale(y, -1.0), one),
                                    scale(mul(w, sigmoid(scale(x, -1.0))), -1.0));
                       },
                       [pwm1](const Tensor& x, const Tensor&) {
                         return add(scale(x, -1.0), mul(pwm1(x), softplus(scale(x, -1.0))));
                       }};
  return pointwise_loss(
      op, input, target, reduction,
      [pw](double x, double y, int64_t k) {
        const double softplus_neg = std::max(-x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
        const double sigmoid_neg =
            x >= 0 ? std::exp(-x) / (1 + std::exp(-x)) : 1 / (1 + std::exp(x));
        if (pw.empty())
          return PointLoss{std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x))),
                           (1 - y) - sigmoid_neg, -x};
        const double p = pw[static_cast<size_t>(k) % pw.size()], w = 1 + (p - 1) * y;
        return PointLoss{(1 - y) * x + w * softplus_neg, (1 - y) - w * sigmoid_neg,
                         -x + (p - 1) * softplus_neg};
      },
      grads);
}

// ---- kl_div, smooth_l1_loss, huber_loss: pointwise, torch 1.13's formulas --------------------
// log_target false: l = target·log(target) − target·x (torch's xlogy: 0 where target = 0),
// ∂l/∂x = −target, ∂l/∂target = log(target) + 1 − x (−inf where target = 0; torch gives NaN).
// log_target true: l = e^t·(t − x), ∂l/∂x = −e^t, ∂l/∂t = e^t·(t − x + 1).
// batchmean: the sum divided by input's first size (a 0-d input: the sum), as torch.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  const Reduction r = reduction == Reduction::batchmean ? Reduction::sum : reduction;
  auto f = [log_target](double x, double t, int64_t) {
    if (log_target) {
      const double e = std::exp(t);
      return PointLoss{e * (t - x), -e, e * (t - x + 1)};
    }
    const double xlogy = t == 0 ? 0.0 : t * std::log(t);
    return PointLoss{xlogy - t * x, -t, std::log(t) + 1 - x};
  };
  PointLossGrads grads;
  if (log_target)
    grads = {
        [](const Tensor&, const Tensor& t) { return neg(exp(t)); },
        [](const Tensor& x, const Tensor& t) { return mul(exp(t), add_scalar(sub(t, x), 1)); }};
  else
    grads = {[](const Tensor&, const Tensor& t) { return neg(t); },
             [](const Tensor& x, const Tensor& t) { return sub(add_scalar(log(t), 1), x); }};
  Tensor out = pointwise_loss("kl_div", input, target, r, f, grads);
  if (reduction == Reduction::batchmean && input.dim() > 0)
    out = out / static_cast<double>(input.size(0));
  return out;
}

// d = x − y, z = |d|: l = 0.5·z²/β where z < β, else z − 0.5·β; ∂l/∂x = −1 where d <= −β, 1 where
// d >= β, else d/β (= clamp(d/β, −1, 1)); ∂l/∂y the same of −d (= −∂l/∂x except at β = 0). β = 0
// gives l1_loss's values and, as torch's backward, the gradient −1 to both at d = 0 (l1's is 0).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  if (!(beta >= 0))
    throw std::invalid_argument(fmt::format(
        "smooth_l1_loss: beta must be >= 0 (torch does not support negative values), got {}",
        beta));
  auto dx = [beta](const Tensor& x, const Tensor& y) {
    if (beta == 0) return add_scalar(scale(le(sub(x, y), 0.0), -2.0), 1.0);  // d <= 0: −1, else 1
    return clamp(sub(x, y) / beta, -1.0, 1.0);
  };
  return pointwise_loss(
      "smooth_l1_loss", input, target, reduction,
      [beta](double x, double y, int64_t) {
        // torch's backward of d; the target's is the same of −d
        auto grad = [beta](double e) { return e <= -beta ? -1.0 : e >= beta ? 1.0 : e / beta; };
        const double d = x - y, z = std::fabs(d);
        return PointLoss{z < beta ? 0.5 * z * z / beta : z - 0.5 * beta, grad(d), grad(-d)};
      },
      {dx, [dx](const Tensor& x, const Tensor& y) { return dx(y, x); }});
}

// d = x − y, z = |d|: l = 0.5·z² where z < δ, else δ·(z − 0.5·δ); ∂l/∂x = clamp(d, −δ, δ) = −∂l/∂y.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  if (!(delta > 0))
    throw std::invalid_argument(fmt::format(
        "huber_loss: delta must be > 0 (torch does not support non-positive values), got {}",
        delta));
  auto dx = [delta](const Tensor& x, const Tensor& y) { return clamp(sub(x, y), -delta, delta); };
  return pointwise_loss(
      "huber_loss", input, target, reduction,
      [delta](double x, double y, int64_t) {
        const double d = x - y, z = std::fabs(d);
        const double gx = d < -delta ? -delta : d > delta ? delta : d;
        return PointLoss{z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta), gx, -gx};
      },
      {dx, [dx](const Tensor& x, const Tensor& y) { return dx(y, x); }});
}

// ---- cosine_similarity: torch 1.13's formula from recorded ops --------------------------------
namespace {
// max(s, floor) whose gradient passes to s unchanged: torch clamps the squared norms in place
// under no_grad, so its graph differentiates them as if unclamped (sqrt's backward then reads the
// clamped value).
Tensor clamp_min_passing_gradient(const Tensor& s, double floor) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = clamp(s, floor);
  }
  if (should_record({s}))
    record("cosine_similarity_clamp", {s}, out, [s](const Tensor& g) { accumulate_grad(s, g); })
        .saves({})
        .composed();
  return out;
}
}  // namespace

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  check_float(x1, op);
  check_float(x2, op);
  check_same_dtype(x1, x2, op);
  const Shape shape = broadcast_shapes(x1.shape(), x2.shape(), op);
  const int64_t ax = normalize_axis(dim, static_cast<int64_t>(shape.size()), op);
  auto unit = [&](const Tensor& x) {  // x / sqrt(max(Σ x², eps²)) along ax (the sum keeps it)
    const Tensor b = x.shape() == shape ? x : expand(x, shape);
    return div(b, sqrt(clamp_min_passing_gradient(sum(mul(b, b), {ax}, true), eps * eps)));
  };
  return sum(mul(unit(x1), unit(x2)), {ax});
}

// ---- nll_loss: −log_probs[n, t_n] over the kept rows; backward −g at each kept target ----------
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets_in, Reduction reduction,
                int64_t ignore_index) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "nll_loss";
  check_reduction(reduction, op);
  check_float(log_probs, op);
  check_arg(log_probs.dim() == 2, op, log_probs, "log_probs of shape [N, C]");
  const int64_t N = log_probs.size(0), C = log_probs.size(1);
  // int32 targets are widened to int64 here (a copy of N values); int64 ones are read in place
  Tensor targets = checked_targets(targets_in, N, op).to(DType::i64);
  const int64_t* t = targets.data<int64_t>();
  const int64_t count = count_targets(t, N, C, ignore_index, op);
  Tensor lp = kernel_input(log_probs);
  Tensor out = Tensor::empty(reduction == Reduction::none ? Shape{N} : Shape{}, lp.dtype());
  dispatch_float(lp.dtype(), op, [&]<class T>() {
    Tensor losses = Tensor::empty({N}, lp.dtype());
    T* l = reduction == Reduction::none ? out.data<T>() : losses.data<T>();
    for (int64_t n = 0; n < N; ++n)
      l[n] = t[n] == ignore_index ? T(0) : -lp.data<T>()[n * C + t[n]];
    if (reduction == Reduction::mean) out.data<T>()[0] = mean_loss(l, N, count);
    if (reduction == Reduction::sum) out.data<T>()[0] = mean_loss(l, N, 1);  // the sum
  });
  if (should_record({log_probs}))
    record(op, {log_probs}, out,
           [log_probs, targets, N, C, count, reduction, ignore_index](const Tensor& g) {
             Tensor gc = g.contiguous();
             Tensor d = Tensor::zeros({N, C}, log_probs.dtype());
             dispatch_float(log_probs.dtype(), "nll_loss", [&]<class T>() {
               const int64_t* t = targets.data<int64_t>();
               const T* gs = gc.data<T>();
               for (int64_t n = 0; n < N; ++n) {
                 if (t[n] == ignore_index) continue;
                 const T gn = reduction == Reduction::none  ? gs[n]
                              : reduction == Reduction::sum ? gs[0]
                                                            : gs[0] / static_cast<T>(count);
                 d.data<T>()[n * C + t[n]] = -gn;
               }
             });
             accumulate_grad(log_probs, d);
           })
        .saves({})
        .differentiable([log_probs, targets, N, C, count, reduction, ignore_index](const Tensor& g,
                                                                                   const Tensor&) {
          // −g·s at each kept target (s the row's scale): a constant times g, linear in g
          const std::vector<double> s =
              row_scales(targets, N, count, ignore_index, reduction, "nll_loss");
          std::vector<double> d(static_cast<size_t>(N * C), 0.0);
          const int64_t* t = targets.data<int64_t>();
          for (int64_t n = 0; n < N; ++n)
            if (t[n] != ignore_index) d[n * C + t[n]] = -s[n];
          accumulate_grad(log_probs, mul(Tensor::from_vector(d, {N, C}, log_probs.dtype()),
                                         row_factor(g, N, reduction)));
        });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

namespace {
// kl_div, smooth_l1_loss, huber_loss, cosine_similarity: input and target pairs as `pair` makes.
template <class Pair>
std::vector<OpCase> distance_loss_op_cases(Pair pair) {
  using V = const std::vector<Tensor>&;
  return {
      {"kl_div/batchmean", pair({3, 4}, 44, -3, -0.5, 0.1, 1),
       [](V in) { return kl_div(in[0], in[1], Reduction::batchmean); }},
      {"kl_div/none, log_target", pair({2, 3}, 45, -2, 0, -2, 0),
       [](V in) { return kl_div(in[0], in[1], Reduction::none, true); }},
      {"kl_div/mean", pair({2, 3}, 46, -2, 0, 0.2, 1),
       [](V in) { return kl_div(in[0], in[1], Reduction::mean); }},
      {"smooth_l1_loss/none, beta 0.5", pair({3, 4}, 47, -1, 1, -1, 1),
       [](V in) { return smooth_l1_loss(in[0], in[1], Reduction::none, 0.5); }},
      {"smooth_l1_loss/mean", pair({3, 4}, 48, -2, 2, -1, 1),
       [](V in) { return smooth_l1_loss(in[0], in[1]); }},
      {"huber_loss/sum, delta 0.7", pair({3, 4}, 49, -2, 2, -1, 1),
       [](V in) { return huber_loss(in[0], in[1], Reduction::sum, 0.7); }},
      {"huber_loss/none", pair({2, 5}, 50, -2, 2, -1, 1),
       [](V in) { return huber_loss(in[0], in[1], Reduction::none); }},
      {"cosine_similarity/dim 1", pair({3, 4}, 51, -1, 1, -1, 1),
       [](V in) { return cosine_similarity(in[0], in[1]); }},
      {"cosine_similarity/broadcast, dim -1",
       [] {
         return std::vector<Tensor>{random_tensor({2, 3, 4}, 52).set_name("x1"),
                                    random_tensor({3, 1}, 53).set_name("x2")};
       },
       [](V in) { return cosine_similarity(in[0], in[1], -1); }},
  };
}
}  // namespace

std::vector<OpCase> loss_op_cases() {
  using V = const std::vector<Tensor>&;
  auto pair = [](Shape s, uint64_t seed, double lo, double hi, double ylo, double yhi) {
    return [=] {
      return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("input"),
                                 random_tensor(s, seed + 100, ylo, yhi).set_name("target")};
    };
  };
  std::vector<OpCase> rows = {
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
       [](V in) { return cross_entropy(in[0], in[1], Reduction::mean, 1); }},
      {"cross_entropy/sum, int32 targets, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 33, -2, 2).set_name("logits"),
                                    Tensor::from_ids({3, -100, 0, 1, 3}, {5}, DType::i32)};
       },
       [](V in) { return cross_entropy(in[0], in[1], Reduction::sum); }},
      {"cross_entropy/none, ignore_index 2",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 34, -2, 2).set_name("logits"),
                                    Tensor::from_ids({2, 0, 1, 2}, {4})};
       },
       [](V in) { return cross_entropy(in[0], in[1], Reduction::none, 2); }},
      {"cross_entropy/none, label_smoothing 0.2, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({4, 5}, 35, -2, 2).set_name("logits"),
                                    Tensor::from_ids({4, -100, 0, 2}, {4})};
       },
       [](V in) { return cross_entropy(in[0], in[1], Reduction::none, -100, 0.2); }},
      {"cross_entropy/sum, label_smoothing 0.1, ignore_index 0",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 36, -2, 2).set_name("logits"),
                                    Tensor::from_ids({0, 2, 1, 0}, {4})};
       },
       [](V in) { return cross_entropy(in[0], in[1], Reduction::sum, 0, 0.1); }},
      {"plain_cross_entropy/none, ignore_index 2",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 37, -2, 2).set_name("logits"),
                                    Tensor::from_ids({2, 0, 1, 2}, {4})};
       },
       [](V in) { return plain_cross_entropy(in[0], in[1], Reduction::none, 2); }},
      {"plain_cross_entropy/sum, label_smoothing 0.3, int32",
       [] {
         return std::vector<Tensor>{random_tensor({3, 4}, 38, -2, 2).set_name("logits"),
                                    Tensor::from_ids({3, -100, 1}, {3}, DType::i32)};
       },
       [](V in) { return plain_cross_entropy(in[0], in[1], Reduction::sum, -100, 0.3); }},
      {"linear_cross_entropy/sum, int32 targets",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 39, -1.5, 1.5).set_name("x"),
                                    random_tensor({7, 3}, 40, -1.5, 1.5).set_name("W"),
                                    Tensor::from_ids({6, 0, -100, 2}, {4}, DType::i32)};
       },
       [](V in) { return linear_cross_entropy(in[0], in[1], in[2], Reduction::sum); }},
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
      {"cross_entropy/label_smoothing 0.1, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({6, 5}, 18, -2, 2).set_name("logits"),
                                    Tensor::from_ids({2, -100, 0, 4, 1, 2}, {6})};
       },
       [](V in) { return cross_entropy(in[0], in[1], Reduction::mean, -100, 0.1); }},
      {"plain_cross_entropy/label_smoothing 0.25, ignore_index 1",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 19, -2, 2).set_name("logits"),
                                    Tensor::from_ids({1, 0, 2, 2}, {4})};
       },
       [](V in) { return plain_cross_entropy(in[0], in[1], Reduction::mean, 1, 0.25); }},
      {"nll_loss/mean, int64 targets, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 20, -3, 0).set_name("log_probs"),
                                    Tensor::from_vector({3, -100, 0, 1, 3}, {5}, DType::i64)};
       },
       [](V in) { return nll_loss(in[0], in[1]); }},
      {"nll_loss/none, ignore_index 2",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 21, -3, 0).set_name("log_probs"),
                                    Tensor::from_ids({2, 0, 1, 2}, {4})};
       },
       [](V in) { return nll_loss(in[0], in[1], Reduction::none, 2); }},
      {"nll_loss/sum of log_softmax", pair({3, 4}, 22, -2, 2, -2, 2),
       [](V in) {
         return nll_loss(log_softmax(in[0]), Tensor::from_ids({3, 0, 3}, {3}), Reduction::sum);
       }},
      // nll_loss, mse_loss, l1_loss and binary_cross_entropy_with_logits with their other
      // reductions (each reduction scales the recorded backward differently under create_graph)
      {"nll_loss/sum, int32 targets, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 40, -3, 0).set_name("log_probs"),
                                    Tensor::from_ids({2, -100, 0, 2}, {4}, DType::i32)};
       },
       [](V in) { return nll_loss(in[0], in[1], Reduction::sum); }},
      {"mse_loss/sum", pair({2, 3}, 41, -1, 1, -1, 1),
       [](V in) { return mse_loss(in[0], in[1], Reduction::sum); }},
      {"l1_loss/mean", pair({2, 3}, 42, -1, 1, -1, 1), [](V in) { return l1_loss(in[0], in[1]); }},
      {"binary_cross_entropy_with_logits/sum, pos_weight [1]", pair({3, 2}, 43, -4, 4, 0, 1),
       [](V in) {
         return binary_cross_entropy_with_logits(in[0], in[1], Reduction::sum,
                                                 Tensor::from_vector({1.5}, {1}, in[0].dtype()));
       }},
      {"mse_loss/mean, target requires grad", pair({3, 4}, 23, -1, 1, -1, 1),
       [](V in) { return mse_loss(in[0], in[1]); }},
      {"mse_loss/none", pair({2, 3}, 28, -1, 1, -1, 1),
       [](V in) { return mse_loss(in[0], in[1], Reduction::none); }},
      {"l1_loss/sum", pair({3, 4}, 29, -1, 1, -1, 1),
       [](V in) { return l1_loss(in[0], in[1], Reduction::sum); }},
      {"l1_loss/none", pair({2, 3}, 30, -1, 1, -1, 1),
       [](V in) { return l1_loss(in[0], in[1], Reduction::none); }},
      {"binary_cross_entropy_with_logits/mean", pair({4, 3}, 31, -4, 4, 0, 1),
       [](V in) { return binary_cross_entropy_with_logits(in[0], in[1]); }},
      {"binary_cross_entropy_with_logits/none, pos_weight [3]", pair({4, 3}, 32, -4, 4, 0, 1),
       [](V in) {
         return binary_cross_entropy_with_logits(
             in[0], in[1], Reduction::none,
             Tensor::from_vector({0.5, 2.0, 3.0}, {3}, in[0].dtype()));
       }},
      {"linear_cross_entropy/tied W, ignore_index 3",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 26, -2, 2).set_name("x"),
                                    random_tensor({6, 3}, 27, -2, 2).set_name("W"),
                                    Tensor::from_ids({3, 0, 5, 3}, {4})};
       },
       [](V in) { return linear_cross_entropy(in[0], in[1], in[2], Reduction::mean, 3); }},
  };
  for (OpCase& c : distance_loss_op_cases(pair)) rows.push_back(std::move(c));
  return rows;
}

}  // namespace dg
