// The losses between an input and a target of its shape, with torch's reductions: mse_loss,
// l1_loss, binary_cross_entropy_with_logits (pos_weight), kl_div (batchmean, log_target),
// smooth_l1_loss, huber_loss, and cosine_similarity (a composition of recorded ops). The losses
// over classes (cross_entropy, linear_cross_entropy, nll_loss) are in ops_loss.cpp. Each forward
// beside its backward, gradient-check rows last. mse_loss, l1_loss and
// binary_cross_entropy_with_logits run a recorded backward under create_graph (autograd/tape.h),
// with the same reductions and pos_weight; kl_div, smooth_l1_loss and huber_loss are
// compositions. Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them; their second
// derivatives tests/test_gradgradcheck_layers.cpp), the reductions in tests/test_losses.cpp, torch
// 1.13's values of the last four in tests/test_torch_ops_b.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/profile.h"

namespace dg {

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

// data table: the loss_regression family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> loss_regression_op_cases() {
  using V = const std::vector<Tensor>&;
  auto pair = [](Shape s, uint64_t seed, double lo, double hi, double ylo, double yhi) {
    return [=] {
      return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("input"),
                                 random_tensor(s, seed + 100, ylo, yhi).set_name("target")};
    };
  };
  // each reduction scales the recorded backward differently under create_graph
  std::vector<OpCase> rows = {
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
  };
  for (OpCase& c : distance_loss_op_cases(pair)) rows.push_back(std::move(c));
  return rows;
}

}  // namespace dg
