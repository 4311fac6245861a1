// Neural-network ops with fused forwards and hand-written backwards: embedding, softmax,
// log_softmax, cross_entropy, linear_cross_entropy, rms_norm, layer_norm, rope, swiglu and
// depth_mix. Each op validates its inputs (errors name the op and the offending tensor, id or
// target), runs a kernel from tensor/kernels_nn.h (kernels_lm_head.h for the fused head) on
// contiguous buffers, and records a backward that adds into the gradients of the inputs that
// require grad. Forwards save per-row statistics only, never extra activations.
// These ops do not promote dtypes, broadcast, or accept non-integer ids/targets.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "autograd/ops.h"
#include "tensor/kernels_lm_head.h"
#include "tensor/kernels_nn.h"
#include "tensor/profile.h"

namespace dg {

namespace {

void check_float(const Tensor& t, const char* op) {
  check_arg(t.defined(), op, t, "a defined tensor");
  check_arg(is_floating(t.dtype()), op, t, "a float32 or float64 tensor");
}

// The contiguous gradient buffer of t that kernels add into (the backward contract).
template <class T>
T* grad_ptr(const Tensor& t, const char* op) {
  Tensor g = grad_of(t);
  if (!g.is_contiguous())
    throw std::logic_error(
        fmt::format("{}: the gradient of {} is not contiguous", op, t.describe()));
  return g.data<T>();
}

// Rows whose target is not ignore_index; throws naming `op` for a target outside [0, C).
// The mean of per-row losses [N] over `count` kept rows, summed in double row by row (a fixed
// order); NaN when every row was ignored, as torch.
template <class T>
T mean_loss(const T* losses, int64_t N, int64_t count) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += losses[n];
  return static_cast<T>(count ? total / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN());
}

int64_t count_targets(const int32_t* t, int64_t N, int64_t C, int32_t ignore_index,
                      const char* op) {
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == ignore_index) continue;
    if (t[n] < 0 || t[n] >= C)
      throw std::out_of_range(fmt::format(
          "{}: target {} at row {} is out of range for {} classes (ignore_index {})", op, t[n], n,
          C, ignore_index));
    ++count;
  }
  return count;
}

// rows × D for a [.., D] tensor.
int64_t rows_of(const Tensor& x) {
  return x.dim() ? x.numel() / std::max<int64_t>(x.size(-1), 1) : 1;
}

// The checks rms_norm and layer_norm share: float x [.., D] and weight [D] of one dtype. Returns D.
int64_t check_norm_args(const Tensor& x, const Tensor& weight, const char* op) {
  check_float(x, op);
  check_float(weight, op);
  check_same_dtype(x, weight, op);
  check_arg(x.dim() >= 1, op, x, "x of shape [.., D]");
  const int64_t D = x.size(-1);
  check_arg(weight.shape() == Shape{D}, op, weight, fmt::format("weight of shape [{}] for x {}", D, x.describe()));
  return D;
}
}  // namespace

// ---- embedding: out[n] = W[ids[n]]; dW[v] += Σ_{ids[n]=v} g[n] ----------------------------------
Tensor embedding(const Tensor& weight, const Tensor& ids_in) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "embedding";
  check_float(weight, op);
  check_arg(weight.dim() == 2, op, weight, "weight of shape [V, D]");
  check_arg(ids_in.defined() && ids_in.dtype() == DType::i32, op, ids_in, "int32 ids");
  const int64_t V = weight.size(0), D = weight.size(1), N = ids_in.numel();
  Tensor ids = ids_in.contiguous();
  const int32_t* id = ids.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    if (id[n] < 0 || id[n] >= V)
      throw std::out_of_range(fmt::format(
          "embedding: id {} at position {} is out of range for vocabulary size {} (weight {})",
          id[n], n, V, weight.describe()));
  Tensor w = weight.contiguous();
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor out = Tensor::empty(out_shape, weight.dtype());
  dispatch_float(weight.dtype(), op,
                 [&]<class T>() { embedding_forward<T>(out.data<T>(), id, w.data<T>(), N, D); });
  if (should_record({weight}))
    record(op, {weight}, out, [weight, ids, N, V, D](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
        embedding_backward<T>(grad_ptr<T>(weight, "embedding"), gc.data<T>(), ids.data<int32_t>(),
                              N, V, D);
      });
    });
  return out;
}

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
    record(op, {a}, out, [a, out, outer, C, inner, log, op](const Tensor& g) {
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

// ---- linear_cross_entropy: cross_entropy(x·Wᵀ) chunk by chunk; saves lse [N] ----------------
// The [N, V] logits and their gradient never exist: forward and backward each compute them one
// column chunk at a time into a pooled scratch buffer (tensor/kernels_lm_head.h); the backward
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
                          targets.data<int32_t>(), N, D, V, ignore_index, chunk,
                          scratch.data<T>());
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
               T* dW = weight.requires_grad() ? grad_ptr<T>(weight, "linear_cross_entropy") : nullptr;
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

// ---- rms_norm: x·rstd·w; saves rstd [rows] ------------------------------------------------------
Tensor rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = "rms_norm";
  const int64_t D = check_norm_args(x_in, weight, op), rows = rows_of(x_in);
  Tensor x = x_in.contiguous(), w = weight.contiguous();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor rstd = Tensor::empty({rows}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), rows, D, eps);
  });
  if (should_record({x_in, weight}))
    record(op, {x_in, weight}, out, [x_in, weight, x, w, rstd, rows, D](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(x.dtype(), "rms_norm", [&]<class T>() {
        T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "rms_norm") : nullptr;
        T* dw = weight.requires_grad() ? grad_ptr<T>(weight, "rms_norm") : nullptr;
        rmsnorm_backward<T>(dx, dw, gc.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(), rows,
                            D);
      });
    });
  return out;
}

// ---- layer_norm: (x − mean)·rstd·w + b; saves mean, rstd [rows] ---------------------------------
Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  ScopedOpTimer op_timer(OpFamily::norms);
  const char* op = "layer_norm";
  const int64_t D = check_norm_args(x_in, weight, op), rows = rows_of(x_in);
  const bool has_bias = bias.defined();
  if (has_bias) {
    check_same_dtype(x_in, bias, op);
    check_arg(bias.shape() == Shape{D}, op, bias,
              fmt::format("bias of shape [{}] for x {}", D, x_in.describe()));
  }
  Tensor x = x_in.contiguous(), w = weight.contiguous(),
         b = has_bias ? bias.contiguous() : Tensor();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  Tensor mean = Tensor::empty({rows}, x_in.dtype()), rstd = Tensor::empty({rows}, x_in.dtype());
  dispatch_float(x.dtype(), op, [&]<class T>() {
    layernorm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(),
                         has_bias ? b.data<T>() : nullptr, rows, D, eps);
  });
  std::vector<Tensor> inputs{x_in, weight};
  if (has_bias) inputs.push_back(bias);
  if (should_record(inputs))
    record(op, inputs, out, [x_in, weight, bias, x, w, mean, rstd, rows, D](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(x.dtype(), "layer_norm", [&]<class T>() {
        T* dx = x_in.requires_grad() ? grad_ptr<T>(x_in, "layer_norm") : nullptr;
        T* dw = weight.requires_grad() ? grad_ptr<T>(weight, "layer_norm") : nullptr;
        T* db = bias.defined() && bias.requires_grad() ? grad_ptr<T>(bias, "layer_norm") : nullptr;
        layernorm_backward<T>(dx, dw, db, gc.data<T>(), x.data<T>(), w.data<T>(), mean.data<T>(),
                              rstd.data<T>(), rows, D);
      });
    });
  return out;
}

RopeTables rope_tables_for(int64_t Tn, int64_t hd, double base, int64_t position_offset, DType dtype) {
  struct Entry {
    int64_t Tn, hd;
    double base;
    int64_t offset;
    DType dtype;
    RopeTables tables;
  };
  thread_local std::vector<Entry> cache;  // most recent last; a handful of entries at most
  for (const Entry& e : cache)
    if (e.Tn == Tn && e.hd == hd && e.base == base && e.offset == position_offset && e.dtype == dtype)
      return e.tables;
  RopeTables t{Tensor::empty({Tn, hd / 2}, dtype), Tensor::empty({Tn, hd / 2}, dtype)};
  dispatch_float(dtype, "rope", [&]<class T>() {
    rope_tables<T>(t.cos.data<T>(), t.sin.data<T>(), Tn, hd, base, position_offset);
  });
  if (cache.size() >= 8) cache.erase(cache.begin());
  cache.push_back({Tn, hd, base, position_offset, dtype, t});
  return t;
}

// ---- rope: rotate pairs (i, i + hd/2) by position·θ_i; backward rotates back --------------------
Tensor rope(const Tensor& x_in, double base, int64_t position_offset) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const char* op = "rope";
  check_float(x_in, op);
  check_arg(x_in.dim() >= 2 && x_in.size(-1) % 2 == 0, op, x_in,
            "x of shape [B, H, T, hd] (or [.., T, hd]) with an even head size hd");
  check_arg(base > 0 && position_offset >= 0, op, x_in,
            fmt::format("a positive base and a non-negative offset (got base {}, offset {})", base,
                        position_offset));
  const int64_t hd = x_in.size(-1), Tn = x_in.size(-2);
  const int64_t BH = Tn * hd != 0 ? x_in.numel() / (Tn * hd) : 0;
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  const RopeTables tables = rope_tables_for(Tn, hd, base, position_offset, x_in.dtype());
  const Tensor cos = tables.cos, sin = tables.sin;
  dispatch_float(x.dtype(), op, [&]<class T>() {
    rope_forward<T>(out.data<T>(), x.data<T>(), cos.data<T>(), sin.data<T>(), BH, Tn, hd);
  });
  if (should_record({x_in}))
    record(op, {x_in}, out, [x_in, cos, sin, BH, Tn, hd](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(x_in.dtype(), "rope", [&]<class T>() {
        rope_backward<T>(grad_ptr<T>(x_in, "rope"), gc.data<T>(), cos.data<T>(), sin.data<T>(), BH,
                         Tn, hd);
      });
    });
  return out;
}

// ---- swiglu: silu(gate)·up in one pass; saves gate and up (not silu(gate)) ------------------------
Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "swiglu";
  check_float(gate_in, op);
  check_same_dtype(gate_in, up_in, op);
  if (gate_in.shape() != up_in.shape())
    throw std::invalid_argument(fmt::format("swiglu: gate {} and up {} must have the same shape",
                                            gate_in.describe(), up_in.describe()));
  Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
  Tensor out = Tensor::empty(gate.shape(), gate.dtype());
  const int64_t n = out.numel();
  dispatch_float(gate.dtype(), op, [&]<class T>() {
    swiglu_forward<T>(out.data<T>(), gate.data<T>(), up.data<T>(), n);
  });
  if (should_record({gate_in, up_in}))
    record(op, {gate_in, up_in}, out, [gate_in, up_in, gate, up, n](const Tensor& g) {
      Tensor gc = g.contiguous();
      std::optional<GradSink> dgate, dup;  // written when fresh, else added into
      if (gate_in.requires_grad()) dgate.emplace(gate_in, std::vector<Tensor>{up_in});
      if (up_in.requires_grad()) dup.emplace(up_in, std::vector<Tensor>{gate_in});
      dispatch_float(gate.dtype(), "swiglu", [&]<class T>() {
        swiglu_backward<T>(dgate ? dgate->data<T>() : nullptr, dgate && dgate->fresh,
                           dup ? dup->data<T>() : nullptr, dup && dup->fresh, gc.data<T>(),
                           gate.data<T>(), up.data<T>(), n);
      });
      if (dgate) dgate->finish();
      if (dup) dup->finish();
    });
  return out;
}

// ---- depth_mix: Σ_j alpha[.., j]·S_j; dS_j += alpha_j·g, dalpha_j += <g, S_j> -------------------
Tensor depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha) {
  ScopedOpTimer op_timer(OpFamily::routing);
  const char* op = "depth_mix";
  if (sources.empty())
    throw std::invalid_argument("depth_mix: expected at least one source, got none");
  const int64_t J = static_cast<int64_t>(sources.size());
  const Tensor& s0 = sources[0];
  check_float(s0, op);
  check_arg(s0.dim() >= 1, op, s0, "sources of shape [.., D]");
  for (int64_t j = 1; j < J; ++j) {
    check_same_dtype(s0, sources[j], op);
    check_arg(sources[j].shape() == s0.shape(), op, sources[j],
              fmt::format("source {} with the shape of source 0 {}", j, shape_str(s0.shape())));
  }
  check_float(alpha, op);
  check_same_dtype(s0, alpha, op);
  Shape alpha_shape = s0.shape();
  alpha_shape.back() = J;
  check_arg(alpha.shape() == alpha_shape, op, alpha,
            fmt::format("alpha of shape {} for {} sources {}", shape_str(alpha_shape), J,
                        shape_str(s0.shape())));
  const int64_t D = s0.size(-1), rows = rows_of(s0);
  std::vector<Tensor> S;
  for (const Tensor& s : sources) S.push_back(s.contiguous());
  Tensor a = alpha.contiguous();
  Tensor out = Tensor::empty(s0.shape(), s0.dtype());
  dispatch_float(s0.dtype(), op, [&]<class T>() {
    std::vector<const T*> ptrs;
    for (const Tensor& s : S) ptrs.push_back(s.data<T>());
    depth_mix_forward<T>(out.data<T>(), ptrs.data(), a.data<T>(), rows, J, D);
  });
  std::vector<Tensor> inputs = sources;
  inputs.push_back(alpha);
  if (should_record(inputs))
    record(op, inputs, out, [sources, alpha, S, a, rows, J, D](const Tensor& g) {
      Tensor gc = g.contiguous();
      dispatch_float(alpha.dtype(), "depth_mix", [&]<class T>() {
        std::vector<const T*> ptrs;
        std::vector<T*> grads;
        for (int64_t j = 0; j < J; ++j) {
          ptrs.push_back(S[j].data<T>());
          grads.push_back(sources[j].requires_grad() ? grad_ptr<T>(sources[j], "depth_mix")
                                                     : nullptr);
        }
        T* dalpha = alpha.requires_grad() ? grad_ptr<T>(alpha, "depth_mix") : nullptr;
        depth_mix_backward<T>(grads.data(), dalpha, gc.data<T>(), ptrs.data(), a.data<T>(), rows, J,
                              D);
      });
    });
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

std::vector<OpCase> nn_op_cases() {
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("x")}; };
  };
  auto mix_inputs = [](int64_t J) {
    return [J] {
      std::vector<Tensor> in;
      for (int64_t j = 0; j < J; ++j)
        in.push_back(random_tensor({2, 3, 4}, 40 + j).set_name(fmt::format("S{}", j)));
      in.push_back(random_tensor({2, 3, J}, 50 + J, 0.1, 1.0).set_name("alpha"));
      return in;
    };
  };
  auto mix_fn = [](V in) {
    return depth_mix(std::vector<Tensor>(in.begin(), in.end() - 1), in.back());
  };
  auto norm_inputs = [](Shape xs, bool bias) {
    return [=] {
      const int64_t D = xs.back();
      std::vector<Tensor> in{random_tensor(xs, 21, -2, 2).set_name("x"),
                             random_tensor({D}, 22, 0.5, 1.5).set_name("weight")};
      if (bias) in.push_back(random_tensor({D}, 23).set_name("bias"));
      return in;
    };
  };
  return {
      {"embedding/repeated ids",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 11).set_name("weight"),
                                    Tensor::from_ids({1, 3, 1, 0, 4, 1}, {2, 3})};
       },
       [](V in) { return embedding(in[0], in[1]); }},
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
      // One column chunk at these sizes; tests/test_kernels_lm_head.cpp checks the kernels with
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
      {"rms_norm/x,weight", norm_inputs({2, 3, 6}, false),
       [](V in) { return rms_norm(in[0], in[1], 1e-6); }},
      {"rms_norm/large eps", norm_inputs({4, 5}, false),
       [](V in) { return rms_norm(in[0], in[1], 0.5); }},
      {"layer_norm/x,weight,bias", norm_inputs({4, 6}, true),
       [](V in) { return layer_norm(in[0], in[1], in[2], 1e-5); }},
      {"layer_norm/no bias", norm_inputs({2, 2, 5}, false),
       [](V in) { return layer_norm(in[0], in[1], Tensor(), 1e-5); }},
      {"rope/[2,3,5,8] offset 3", one({2, 3, 5, 8}, 18),
       [](V in) { return rope(in[0], 10000.0, 3); }},
      {"rope/base 100", one({1, 2, 4, 6}, 19), [](V in) { return rope(in[0], 100.0, 0); }},
      {"swiglu",
       [] {
         return std::vector<Tensor>{random_tensor({3, 7}, 24, -3, 3).set_name("gate"),
                                    random_tensor({3, 7}, 25, -2, 2).set_name("up")};
       },
       [](V in) { return swiglu(in[0], in[1]); }},
      {"swiglu/gate is up", one({2, 5}, 26, -3, 3), [](V in) { return swiglu(in[0], in[0]); }},
      {"depth_mix/J=1", mix_inputs(1), mix_fn},
      {"depth_mix/J=2", mix_inputs(2), mix_fn},
      {"depth_mix/J=3", mix_inputs(3), mix_fn},
  };
}

}  // namespace dg
