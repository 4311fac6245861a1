// batch_norm, batch_norm_relu and group_norm over x [N, C, *] (torch.nn.functional's semantics;
// batch_norm_relu is relu(batch_norm(..)) in one pass each way, the same bits): a fused forward
// (saving the per-channel or per-group mean and rstd) beside its hand-written backward, kernels in
// tensor/kernels_norm.h, and their gradient-check rows. batch_norm in training normalises by the
// batch's statistics and updates the running statistics in place (not recorded; a version bump);
// in eval it normalises by the running statistics. Under create_graph both run a recorded backward
// that recomputes the normalisation with ops (channel_norm_backward_recorded); the kernels'
// backward stays the first-order one. Refuses: gradients into the running statistics (torch gives
// none either), a training batch of one value per channel (as torch). Checks: the rows at the end
// (gradcheck and gradgradcheck), torch 1.13 goldens, thread bit-identity and the errors in
// tests/test_batchnorm_ops.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_norm.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// Checks an optional per-channel tensor (weight, bias, running_mean, running_var): [C], x's dtype.
void check_channel_arg(const Tensor& t, const Tensor& x, int64_t C, const char* op,
                       const char* what) {
  if (!t.defined()) return;
  check_arg(t.dtype() == x.dtype(), op, t,
            fmt::format("{} of x's dtype {}", what, dtype_name(x.dtype())));
  check_arg(t.shape() == Shape{C}, op, t,
            fmt::format("{} of shape [{}] for x {}", what, C, x.describe()));
}

// The elements per channel and sample: Π x.shape[2:].
int64_t spatial_size(const Tensor& x) {
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return S;
}

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// running = (1 − momentum)·running + momentum·batch, in place (a version bump, not recorded);
// `unbias` scales the batch value by M/(M − 1) (the running variance is unbiased, as torch's).
template <class T>
void update_running(const Tensor& running, const Tensor& batch, double momentum, double unbias) {
  T* r = running.mutable_data<T>();
  const T* b = batch.data<T>();
  for (int64_t c = 0; c < running.numel(); ++c)
    r[c] = static_cast<T>((1.0 - momentum) * r[c] + momentum * unbias * b[c]);
}

// The backward of batch_norm or group_norm as recorded ops, for create_graph. x is viewed as
// [A, B, D] with statistics over the axes `stats_axes` of that view: batch norm [N, C, S] over
// {0, 2} (or, in eval, the constants mean, rstd [C]), group norm [N, G, C/G·S] over {2}. With
// xhat = (x − mean)·r, r = (var + eps)^(−1/2), gw = g·w[c] and means over the statistics' axes:
//   dw[c] = Σ_{n,s} g·xhat,  db[c] = Σ_{n,s} g,  dx = r·(gw − mean(gw) − xhat·mean(gw·xhat))
// (dx = r·gw when the statistics are constants). The same values as the kernels' backward.
struct ChannelNormView {
  Shape stats_view;                 // [A, B, D]: where the statistics are taken
  std::vector<int64_t> stats_axes;  // of stats_view
  Tensor mean, rstd;                // constants (eval batch norm), else undefined
};
void channel_norm_backward_recorded(const Tensor& g, const Tensor& x, const Tensor& weight,
                                    const Tensor& bias, double eps, const ChannelNormView& v) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(N * C, 1);
  const Tensor xs = reshape(x, v.stats_view);
  Tensor xhat, r;  // in stats_view
  if (v.mean.defined()) {
    const Shape per_channel{1, C, 1};
    r = reshape(v.rstd, per_channel);
    xhat = mul(sub(xs, reshape(v.mean, per_channel)), r);
  } else {
    const Tensor xc = sub(xs, mean(xs, v.stats_axes, /*keepdim=*/true));
    const Tensor variance = mean(mul(xc, xc), v.stats_axes, /*keepdim=*/true);
    r = pow(add(variance, Tensor::full({}, eps, x.dtype())), -0.5);
    xhat = mul(xc, r);
  }
  const Shape channels{N, C, S};
  const Tensor g3 = reshape(g, channels), xhat3 = reshape(xhat, channels);
  if (weight.defined() && weight.requires_grad())
    accumulate_grad(weight, sum(mul(g3, xhat3), {0, 2}));
  if (bias.defined() && bias.requires_grad()) accumulate_grad(bias, sum(g3, {0, 2}));
  if (!x.requires_grad()) return;
  const Tensor gw =
      reshape(weight.defined() ? mul(g3, reshape(weight, {1, C, 1})) : g3, v.stats_view);
  Tensor inner = gw;
  if (!v.mean.defined())
    inner = sub(sub(gw, mean(gw, v.stats_axes, true)),
                mul(xhat, mean(mul(gw, xhat), v.stats_axes, true)));
  accumulate_grad(x, reshape(mul(inner, r), x.shape()));
}

// The inputs a backward reads and those that get gradients: x, then the defined weight, bias.
std::vector<Tensor> affine_inputs(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  std::vector<Tensor> inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return inputs;
}
// batch_norm's argument checks: x [N, C, *], the per-channel tensors, the running statistics
// (buffers, given together; needed in eval mode), more than one value per channel when training.
void check_batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                      const Tensor& weight, const Tensor& bias, bool training, double momentum,
                      double eps, const char* op) {
  check_float(x_in, op);
  check_arg(x_in.dim() >= 2, op, x_in, "x of shape [N, C, *]");
  const int64_t N = x_in.size(0), C = x_in.size(1), S = spatial_size(x_in);
  check_channel_arg(weight, x_in, C, op, "weight");
  check_channel_arg(bias, x_in, C, op, "bias");
  check_channel_arg(running_mean, x_in, C, op, "running_mean");
  check_channel_arg(running_var, x_in, C, op, "running_var");
  for (const Tensor* r : {&running_mean, &running_var})
    if (r->defined())
      check_arg(!r->requires_grad() && r->is_contiguous(), op, *r,
                "running statistics that are contiguous and do not require grad (buffers)");
  if (running_mean.defined() != running_var.defined())
    throw std::invalid_argument(
        "batch_norm: running_mean and running_var must be given together or not at all");
  if (!training && !running_mean.defined())
    throw std::invalid_argument(
        "batch_norm: running_mean and running_var are needed in eval mode (training = false)");
  if (training && N * S <= 1)
    throw std::invalid_argument(
        fmt::format("batch_norm: expected more than 1 value per channel when training, got x {}",
                    x_in.describe()));
  if (!(eps > 0) || !std::isfinite(momentum))
    throw std::invalid_argument(fmt::format(
        "batch_norm: eps must be > 0 and momentum finite, got eps {}, momentum {}", eps, momentum));
}

}  // namespace

namespace {
// The per-channel mean and rstd batch_norm normalises by: the batch's (training; the running
// statistics, when given, move toward them) or the running statistics (eval).
template <class T>
void channel_statistics(Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = spatial_size(x);
  if (training) {
    Tensor var = Tensor::empty({C}, x.dtype());
    batchnorm_stats<T>(mean.data<T>(), var.data<T>(), x.data<T>(), N, C, S);
    for (int64_t c = 0; c < C; ++c)
      rstd.data<T>()[c] = static_cast<T>(1.0 / std::sqrt(var.data<T>()[c] + eps));
    if (running_mean.defined()) {
      const double M = static_cast<double>(N * S);
      update_running<T>(running_mean, mean, momentum, 1.0);
      update_running<T>(running_var, var, momentum, M / (M - 1.0));
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c) {
    mean.data<T>()[c] = running_mean.data<T>()[c];
    rstd.data<T>()[c] = static_cast<T>(1.0 / std::sqrt(running_var.data<T>()[c] + eps));
  }
}

// batch_norm, and with relu batch_norm_relu: the statistics, one pass of the affine map (and
// relu), and the backward: the kernels' (relu's mask recomputed from x), or under create_graph
// the recorded one behind relu's recorded backward.
Tensor batch_norm_impl(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps, bool relu) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  check_batch_norm(x_in, running_mean, running_var, weight, bias, training, momentum, eps, op);
  const int64_t N = x_in.size(0), C = x_in.size(1), S = spatial_size(x_in);
  Tensor x = kernel_input(x_in), w = weight.defined() ? kernel_input(weight) : Tensor(),
         b = bias.defined() ? kernel_input(bias) : Tensor();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor mean = Tensor::empty({C}, x_in.dtype()), rstd = Tensor::empty({C}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    channel_statistics<T>(mean, rstd, x, running_mean, running_var, training, momentum, eps);
    batchnorm_apply<T>(out.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
                       data_or_null<T>(w), data_or_null<T>(b), N, C, S, relu);
  });
  if (tracing())
    trace_op(op, {x_in, running_mean, running_var, weight, bias}, {out},
             {{"training", training}, {"eps", eps}});
  const std::vector<Tensor> inputs = affine_inputs(x_in, weight, bias);
  if (!should_record(inputs)) return out;
  RecordedNode node = record(
      op, inputs, out,
      [x_in, weight, bias, x, w, b, mean, rstd, N, C, S, training, relu, op](const Tensor& g) {
        Tensor gc = g.contiguous();
        // dx written whole (no zero-fill) when x has no gradient yet
        std::optional<GradSink> sink;
        if (x_in.requires_grad()) sink.emplace(x_in, std::vector<Tensor>{weight, bias});
        dispatch_float(x.dtype(), op, [&]<class T>() {
          T* dx = sink ? sink->data<T>() : nullptr;
          T* dw = weight.defined() && weight.requires_grad() ? grad_ptr<T>(weight, op) : nullptr;
          T* db = bias.defined() && bias.requires_grad() ? grad_ptr<T>(bias, op) : nullptr;
          batchnorm_backward<T>(dx, dw, db, gc.data<T>(), x.data<T>(), data_or_null<T>(w),
                                mean.data<T>(), rstd.data<T>(), N, C, S, training, relu,
                                data_or_null<T>(b), sink && sink->fresh);
        });
        if (sink) sink->finish();
      });
  // The bias is read only for relu's mask; the running statistics were copied.
  if (relu)
    node.saves({x_in, weight, bias});
  else
    node.saves({x_in, weight});
  node.differentiable([x_in, weight, bias, eps, mean, rstd, N, C, S, training, relu](
                          const Tensor& g, const Tensor& y) {
    ChannelNormView view{{N, C, S}, {0, 2}, Tensor(), Tensor()};
    if (!training) {
      view.mean = mean;
      view.rstd = rstd;
    }
    // relu's recorded backward (unary_pointwise_recorded's), then batch norm's
    const Tensor gn = relu ? masked_fill(g, le(y, 0.0), 0.0) : g;
    channel_norm_backward_recorded(gn, x_in, weight, bias, eps, view);
  });
  return out;
}
}  // namespace

// ---- batch_norm: x [N, C, *] -> (x − mean[c])·rstd[c]·w[c] + b[c]; saves mean, rstd [C] --------
// Training: mean and the biased variance over N and *, and (running stats given) running_mean,
// running_var ← (1 − momentum)·running + momentum·(batch mean, unbiased batch variance). Eval:
// mean = running_mean, rstd = 1/sqrt(running_var + eps); the output is then affine in x.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps,
                         false);
}

// ---- batch_norm_relu: relu(batch_norm(x, ...)) in one pass each way -------------------------
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps, true);
}

Tensor plain_batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& weight, const Tensor& bias, bool training,
                             double momentum, double eps) {
  return relu(batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps));
}

// ---- group_norm: x [N, C, *] -> per (sample, group of C/G channels) layer norm, then w[c], b[c]
// ---
Tensor group_norm(const Tensor& x_in, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = "group_norm";
  check_float(x_in, op);
  check_arg(x_in.dim() >= 2, op, x_in, "x of shape [N, C, *]");
  const int64_t N = x_in.size(0), C = x_in.size(1), S = spatial_size(x_in), G = num_groups;
  if (G < 1 || C % G != 0)
    throw std::invalid_argument(
        fmt::format("group_norm: num_groups {} must be >= 1 and divide the channels C = {} of x {}",
                    G, C, x_in.describe()));
  if (!(eps > 0))
    throw std::invalid_argument(fmt::format("group_norm: eps must be > 0, got {}", eps));
  check_channel_arg(weight, x_in, C, op, "weight");
  check_channel_arg(bias, x_in, C, op, "bias");
  Tensor x = kernel_input(x_in), w = weight.defined() ? kernel_input(weight) : Tensor(),
         b = bias.defined() ? kernel_input(bias) : Tensor();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor mean = Tensor::empty({N, G}, x_in.dtype()), rstd = Tensor::empty({N, G}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    groupnorm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(),
                         data_or_null<T>(w), data_or_null<T>(b), N, C, S, G, eps);
  });
  if (tracing()) trace_op(op, {x_in, weight, bias}, {out}, {{"num_groups", G}, {"eps", eps}});
  const std::vector<Tensor> inputs = affine_inputs(x_in, weight, bias);
  if (should_record(inputs))
    record(op, inputs, out,
           [x_in, weight, bias, x, w, mean, rstd, N, C, S, G](const Tensor& g) {
             Tensor gc = g.contiguous();
             dispatch_float(x.dtype(), "group_norm", [&]<class T>() {
               T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "group_norm") : nullptr;
               T* dw = weight.defined() && weight.requires_grad()
                           ? grad_ptr<T>(weight, "group_norm")
                           : nullptr;
               T* db = bias.defined() && bias.requires_grad() ? grad_ptr<T>(bias, "group_norm")
                                                              : nullptr;
               groupnorm_backward<T>(dx, dw, db, gc.data<T>(), x.data<T>(), data_or_null<T>(w),
                                     mean.data<T>(), rstd.data<T>(), N, C, S, G);
             });
           })
        .saves({x_in, weight})  // the bias is not read
        .differentiable([x_in, weight, bias, eps, N, C, S, G](const Tensor& g, const Tensor&) {
          channel_norm_backward_recorded(g, x_in, weight, bias, eps,
                                         {{N, G, C / G * S}, {2}, Tensor(), Tensor()});
        });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the batchnorm family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> batchnorm_op_cases() {
  using V = const std::vector<Tensor>&;
  // x [N, C, *] with per-channel offsets and scales (statistics away from zero variance), then
  // weight and bias when affine.
  auto inputs = [](Shape xs, bool affine) {
    return [=] {
      const int64_t C = xs[1];
      std::vector<Tensor> in{random_tensor(xs, 31, -2, 2).set_name("x")};
      if (affine) {
        in.push_back(random_tensor({C}, 32, 0.5, 1.5).set_name("weight"));
        in.push_back(random_tensor({C}, 33).set_name("bias"));
      }
      return in;
    };
  };
  auto opt = [](V in, size_t i) { return in.size() > i ? in[i] : Tensor(); };
  // Eval mode reads running statistics: constants of the row (fresh each call, never updated).
  auto running = [](const Tensor& x, int64_t seed, double lo, double hi) {
    return detach(random_tensor({x.size(1)}, seed, lo, hi)).to(x.dtype());
  };
  return {
      {"batch_norm/train [N,C,H,W] affine", inputs({3, 2, 2, 3}, true),
       [=](V in) {
         // Running stats are updated in place each call; the output does not read them.
         Tensor rm = running(in[0], 34, -1, 1), rv = running(in[0], 35, 0.5, 2);
         return batch_norm(in[0], rm, rv, opt(in, 1), opt(in, 2), true, 0.1, 1e-5);
       }},
      {"batch_norm/train [N,C] no affine, no running stats", inputs({5, 3}, false),
       [=](V in) {
         return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
       }},
      {"batch_norm/train [N,C,L] affine", inputs({2, 3, 4}, true),
       [=](V in) {
         return batch_norm(in[0], Tensor(), Tensor(), opt(in, 1), opt(in, 2), true, 0.1, 1e-3);
       }},
      {"batch_norm/eval [N,C,H,W] affine", inputs({2, 3, 2, 2}, true),
       [=](V in) {
         return batch_norm(in[0], running(in[0], 36, -1, 1), running(in[0], 37, 0.5, 2), opt(in, 1),
                           opt(in, 2), false, 0.1, 1e-5);
       }},
      {"batch_norm/eval [N,C] no affine", inputs({4, 3}, false),
       [=](V in) {
         return batch_norm(in[0], running(in[0], 38, -1, 1), running(in[0], 39, 0.5, 2), Tensor(),
                           Tensor(), false, 0.1, 1e-5);
       }},
      {"batch_norm_relu/train [N,C,H,W] affine", inputs({3, 2, 2, 3}, true),
       [=](V in) {
         Tensor rm = running(in[0], 34, -1, 1), rv = running(in[0], 35, 0.5, 2);
         return batch_norm_relu(in[0], rm, rv, opt(in, 1), opt(in, 2), true, 0.1, 1e-5);
       }},
      {"batch_norm_relu/eval [N,C,H,W] affine", inputs({2, 3, 2, 2}, true),
       [=](V in) {
         return batch_norm_relu(in[0], running(in[0], 36, -1, 1), running(in[0], 37, 0.5, 2),
                                opt(in, 1), opt(in, 2), false, 0.1, 1e-5);
       }},
      {"group_norm/[N,C,H,W] affine", inputs({2, 4, 2, 3}, true),
       [=](V in) { return group_norm(in[0], 2, opt(in, 1), opt(in, 2), 1e-5); }},
      {"group_norm/[N,C,L] no affine", inputs({3, 6, 2}, false),
       [=](V in) { return group_norm(in[0], 3, Tensor(), Tensor(), 1e-5); }},
      {"group_norm/one group [N,C]", inputs({3, 4}, true),
       [=](V in) { return group_norm(in[0], 1, opt(in, 1), opt(in, 2), 1e-5); }},
  };
}

}  // namespace dg
