// The losses over classes: cross_entropy over given logits with optional label smoothing (after
// its plain twin plain_cross_entropy), linear_cross_entropy (the fused language-model head; kernels
// in tensor/kernels_loss.h) and nll_loss, with torch's reductions. The losses between an input and
// a target of its shape (mse, l1, binary cross-entropy with logits, kl_div, smooth_l1, huber,
// cosine_similarity) are in ops_loss_regression.cpp; softmax and log_softmax in ops_softmax.cpp.
// Each op validates its inputs (errors name the op and the offending tensor or target) and records
// a backward that adds into the inputs' gradients. Under create_graph (autograd/tape.h)
// cross_entropy ((softmax − target distribution)·row scale, softmax recorded) and nll_loss run a
// recorded backward with the same conventions (reductions, ignore_index, label smoothing);
// plain_cross_entropy is a composition; linear_cross_entropy refuses. Does not do: class weights,
// soft targets, K-dimensional targets. Checks: the rows at the end (tests/test_gradcheck_ops.cpp
// runs them), the kernels in tests/test_kernels_loss.cpp, the reductions in
// tests/test_losses.cpp, the plain twins in tests/test_plain_ops.cpp. plain_log_softmax_rows is an
// exercise of the learner's path (tensor/exercise.h).
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

// Reduction::batchmean is kl_div's (torch accepts 'batchmean' only there): every other loss, here
// and in ops_loss_regression.cpp, refuses it (declared in autograd/op_util.h).
void check_reduction(Reduction reduction, const char* op) {
  if (reduction == Reduction::batchmean)
    throw std::invalid_argument(fmt::format(
        "{}: reduction batchmean is kl_div's only (as torch); use Reduction::mean, sum or none",
        op));
}

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
namespace {
// What cross_entropy's backwards read: the logits [N, C] (x: as the kernels read them), the row
// log-sum-exps [N], the targets, and the settings; count is the number of kept rows.
struct CrossEntropySaved {
  Tensor logits, x, lse, targets;
  int64_t N, C, ignore_index, count;
  double eps;
  Reduction reduction;
};

// The kernel backward: dlogits += (softmax − target distribution)·row scale·g.
void cross_entropy_kernel_backward(const Tensor& g, const CrossEntropySaved& s) {
  if (s.count == 0) {  // every target ignored: the gradient is zero (as torch)
    grad_of(s.logits);
    return;
  }
  const int64_t N = s.N, C = s.C;
  Tensor gc = g.contiguous();
  dispatch_index(s.targets, "cross_entropy", "targets", [&]<class I>() {
    dispatch_float(s.logits.dtype(), "cross_entropy", [&]<class T>() {
      T* dl = grad_ptr<T>(s.logits, "cross_entropy");
      const I* t = s.targets.data<I>();
      const T* x = s.x.data<T>();
      const T* lse = s.lse.data<T>();
      // rows [n0, n0 + rows) scaled by sc: all rows at once, or one row at a time (none)
      auto run = [&](int64_t n0, int64_t rows, double sc) {
        if (s.eps == 0.0)
          cross_entropy_backward<T>(dl + n0 * C, x + n0 * C, lse + n0, t + n0, static_cast<T>(sc),
                                    rows, C, s.ignore_index);
        else
          cross_entropy_smoothed_backward<T>(dl + n0 * C, x + n0 * C, lse + n0, t + n0,
                                             static_cast<T>(sc), rows, C, s.ignore_index, s.eps);
      };
      if (s.reduction == Reduction::mean)
        run(0, N, static_cast<double>(gc.data<T>()[0]) / static_cast<double>(s.count));
      else if (s.reduction == Reduction::sum)
        run(0, N, static_cast<double>(gc.data<T>()[0]));
      else
        for (int64_t n = 0; n < N; ++n) run(n, 1, static_cast<double>(gc.data<T>()[n]));
    });
  });
}

// The recorded backward (create_graph): (softmax(x) − q)·s·g per row, q = (1 − ε)·onehot + ε/C
// the target distribution and s the row's scale (0 at ignored rows): softmax recorded, q and s
// constants.
void cross_entropy_recorded_backward(const Tensor& g, const Tensor& logits, const Tensor& targets,
                                     int64_t N, int64_t C, int64_t ignore_index, int64_t count,
                                     double eps, Reduction reduction) {
  std::vector<double> s = row_scales(targets, N, count, ignore_index, reduction, "cross_entropy");
  std::vector<double> q(static_cast<size_t>(N * C), 0.0);
  dispatch_index(targets, "cross_entropy", "targets", [&]<class I>() {
    for (int64_t n = 0; n < N; ++n) {
      const I t = targets.data<I>()[n];
      if (t == ignore_index) continue;
      for (int64_t c = 0; c < C; ++c)
        q[n * C + c] = -(eps / static_cast<double>(C) + (c == t ? 1.0 - eps : 0.0));
    }
  });
  const Tensor diff = add(softmax(logits, -1), Tensor::from_vector(q, {N, C}, logits.dtype()));
  const Tensor rows =
      mul(Tensor::from_vector(s, {N, 1}, logits.dtype()), row_factor(g, N, reduction));
  accumulate_grad(logits, mul(diff, rows));
}
}  // namespace

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
           [saved = CrossEntropySaved{logits, x, lse, targets, N, C, ignore_index, count, eps,
                                      reduction}](const Tensor& g) {
             cross_entropy_kernel_backward(g, saved);
           })
        .differentiable([logits, targets, N, C, ignore_index, count, eps, reduction](
                            const Tensor& g, const Tensor&) {
          cross_entropy_recorded_backward(g, logits, targets, N, C, ignore_index, count, eps,
                                          reduction);
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

// data table: the loss family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> loss_op_cases() {
  using V = const std::vector<Tensor>&;
  auto pair = [](Shape s, uint64_t seed, double lo, double hi, double ylo, double yhi) {
    return [=] {
      return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("input"),
                                 random_tensor(s, seed + 100, ylo, yhi).set_name("target")};
    };
  };
  return {
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
      // nll_loss with its other reductions (each scales the recorded backward differently under
      // create_graph)
      {"nll_loss/sum, int32 targets, some ignored",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 40, -3, 0).set_name("log_probs"),
                                    Tensor::from_ids({2, -100, 0, 2}, {4}, DType::i32)};
       },
       [](V in) { return nll_loss(in[0], in[1], Reduction::sum); }},
      {"linear_cross_entropy/tied W, ignore_index 3",
       [] {
         return std::vector<Tensor>{random_tensor({4, 3}, 26, -2, 2).set_name("x"),
                                    random_tensor({6, 3}, 27, -2, 2).set_name("W"),
                                    Tensor::from_ids({3, 0, 5, 3}, {4})};
       },
       [](V in) { return linear_cross_entropy(in[0], in[1], in[2], Reduction::mean, 3); }},
  };
}

}  // namespace dg
