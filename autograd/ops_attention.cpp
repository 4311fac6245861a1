// Attention ops (kernels in tensor/kernels_attention.h): rope, then plain_attention (the whole
// computation from primitive ops, to read first), then the fused causal_attention (after its plain
// twin plain_causal_attention) and
// attention_heads, each forward beside its backward, then the gradient-check rows. The tape keeps
// q, k, v, the output and one logsumexp per query row (B·H·T values); the backward recomputes the
// T×T probabilities block by block. Does not do: other masks, dropout, a KV cache (query and key
// lengths must be equal).
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the kernels in
// tests/test_kernels_attention.cpp, plain_attention against the fused path in
// tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "autograd/gradcheck.h"
#include "autograd/op_trace.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/kernels_attention.h"
#include "tensor/profile.h"

namespace dg {

RopeTables rope_tables_for(int64_t Tn, int64_t hd, double base, int64_t position_offset,
                           DType dtype) {
  struct Entry {
    int64_t Tn, hd;
    double base;
    int64_t offset;
    DType dtype;
    RopeTables tables;
  };
  thread_local std::vector<Entry> cache;  // most recent last; a handful of entries at most
  for (const Entry& e : cache)
    if (e.Tn == Tn && e.hd == hd && e.base == base && e.offset == position_offset &&
        e.dtype == dtype)
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
  Tensor x = kernel_input(x_in);
  Tensor out = Tensor::empty(x_in.shape(), x_in.dtype());
  const RopeTables tables = rope_tables_for(Tn, hd, base, position_offset, x_in.dtype());
  const Tensor cos = tables.cos, sin = tables.sin;
  dispatch_float(x.dtype(), op, [&]<class T>() {
    rope_forward<T>(out.data<T>(), x.data<T>(), cos.data<T>(), sin.data<T>(), BH, Tn, hd);
  });
  if (should_record({x_in}))
    record(op, {x_in}, out,
           [x_in, cos, sin, BH, Tn, hd](const Tensor& g) {
             Tensor gc = g.contiguous();
             dispatch_float(x_in.dtype(), "rope", [&]<class T>() {
               rope_backward<T>(grad_ptr<T>(x_in, "rope"), gc.data<T>(), cos.data<T>(),
                                sin.data<T>(), BH, Tn, hd);
             });
           })
        .saves({})
        .differentiable([x_in, cos, sin, hd](const Tensor& g, const Tensor&) {
          // the rotation by −position·θ with recorded ops (the tables are constants):
          // g_x1 = g1·cos + g2·sin, g_x2 = g2·cos − g1·sin, for the halves (x1, x2) of each head
          const int64_t axis = g.dim() - 1, half = hd / 2;
          const Tensor g1 = slice(g, axis, 0, half), g2 = slice(g, axis, half, hd);
          accumulate_grad(
              x_in, cat({add(mul(g1, cos), mul(g2, sin)), sub(mul(g2, cos), mul(g1, sin))}, axis));
        });
  if (tracing())
    trace_op(op, {x_in}, {out}, {{"base", base}, {"position_offset", position_offset}});
  return out;
}

// ---- causal_mask: [T, T], 0 on and below the diagonal, −inf above ------------------------------
// Query i may read keys 0..i: key j > i is the future and gets −inf, which softmax turns into a
// weight of exactly 0 (exp(−inf) = 0). The diagonal stays visible, so no row is all −inf (a row
// of only −inf would give 0/0 = NaN). Built once per call of a plain attention, never per element.
DG_EXERCISE Tensor causal_mask(int64_t T, DType dtype) {
  if (T < 0 || !is_floating(dtype))
    throw std::invalid_argument(fmt::format(
        "causal_mask: expected a length T >= 0 and a float32 or float64 dtype, got T {} and {}", T,
        dtype_name(dtype)));
  std::vector<double> hidden(T * T, 0.0);  // row i: query position i; column j: key position j
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j)
      hidden[i * T + j] = -std::numeric_limits<double>::infinity();
  return Tensor::from_vector(hidden, {T, T}, dtype);
}

// ---- plain_attention: self-attention from primitive ops (read this first) ----------------------
// The formula of ops.h step by step. The tape keeps every intermediate, including the [B,H,T,T]
// scores and probabilities; causal_attention and attention_heads below compute the same values
// without them.
Tensor plain_attention(const Tensor& u_qk, const Tensor& u_v, const Tensor& wq, const Tensor& bq,
                       const Tensor& wk, const Tensor& bk, const Tensor& wv, const Tensor& bv,
                       int64_t H, int64_t Hkv, double rope_base, double scale) {
  const char* op = "plain_attention";
  check_arg(u_qk.defined() && u_qk.dim() == 3, op, u_qk, "u_qk of shape [B, T, D]");
  check_arg(wq.defined() && wq.dim() == 2, op, wq, "wq of shape [heads·head_dim, D]");
  check_arg(H > 0 && Hkv > 0 && H % Hkv == 0 && wq.size(0) % H == 0, op, wq,
            fmt::format("heads ({}) a positive multiple of kv_heads ({}) dividing {} rows", H, Hkv,
                        wq.size(0)));
  const int64_t B = u_qk.size(0), T = u_qk.size(1), hd = wq.size(0) / H, group = H / Hkv;
  // [B, T, n·hd] -> [B, n, T, hd]
  auto split = [&](const Tensor& x, int64_t n) {
    return permute(reshape(x, {B, T, n, hd}), {0, 2, 1, 3});
  };
  Tensor q = split(linear(u_qk, wq, bq), H);
  Tensor k = split(linear(u_qk, wk, bk), Hkv);
  Tensor v = split(linear(u_v, wv, bv), Hkv);
  if (rope_base > 0) {
    q = rope(q, rope_base);
    k = rope(k, rope_base);
  }
  if (group > 1) {  // kv head g serves query heads g·group .. g·group + group − 1
    auto repeat = [&](const Tensor& x) {
      return reshape(expand(reshape(x, {B, Hkv, 1, T, hd}), {B, Hkv, group, T, hd}), {B, H, T, hd});
    };
    k = repeat(k);
    v = repeat(v);
  }
  const double sc = attention_scale(scale, hd, op);
  Tensor scores = dg::scale(matmul(q, transpose(k, 2, 3)), sc);  // [B, H, T, T]
  Tensor p = softmax(add(scores, causal_mask(T, q.dtype())), -1);
  Tensor o = matmul(p, v);                                   // [B, H, T, hd]
  return reshape(permute(o, {0, 2, 1, 3}), {B, T, H * hd});  // merge heads
}

// ---- plain_causal_attention: causal_attention from primitive ops (read this first) --------------
// Each kv head repeated for its H / Hkv query heads, scores = q·kᵀ·scale [B, H, T, T] plus a mask
// (−inf above the diagonal), softmax over keys, then ·v. The tape keeps the T×T scores and
// probabilities, which causal_attention below never holds (the same steps as in plain_attention).
Tensor plain_causal_attention(const Tensor& q, const Tensor& k_in, const Tensor& v_in,
                              double scale) {
  const char* op = "plain_causal_attention";
  const AttentionShape s = attention_shape(q, k_in, v_in, op);
  const int64_t B = s.B, H = s.H, Hkv = s.Hkv, T = s.T, hd = s.hd, group = H / Hkv;
  Tensor k = k_in, v = v_in;
  if (group > 1) {  // kv head g serves query heads g·group .. g·group + group − 1
    auto repeat = [&](const Tensor& x) {
      return reshape(expand(reshape(x, {B, Hkv, 1, T, hd}), {B, Hkv, group, T, hd}), {B, H, T, hd});
    };
    k = repeat(k);
    v = repeat(v);
  }
  const double sc = attention_scale(scale, hd, op);
  const Tensor scores = dg::scale(matmul(q, transpose(k, 2, 3)), sc);  // [B, H, T, T]
  const Tensor out = matmul(softmax(add(scores, causal_mask(T, q.dtype())), -1), v);  // [B,H,T,hd]
  if (tracing()) trace_op("causal_attention", {q, k_in, v_in}, {out}, {{"scale", sc}});  // one op
  return out;
}

// ---- causal_attention: q [B,H,T,hd], k v [B,Hkv,T,hd] -> [B,H,T,hd] -------------------------
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const AttentionShape s = attention_shape(q, k, v, "causal_attention");
  const double sc = attention_scale(scale, s.hd, "causal_attention");
  // Written as [B,T,H,hd] and returned as its [B,H,T,hd] view: the caller's merge of the heads
  // (permute back, reshape to [B,T,H·hd]) is then a view, not a copy.
  Tensor out = raw::view_permute(Tensor::empty({s.B, s.T, s.H, s.hd}, q.dtype()), {0, 2, 1, 3});
  Tensor lse = Tensor::empty({s.B, s.H, s.T}, q.dtype());
  attention_forward(q, k, v, sc, out, lse);
  if (should_record({q, k, v}))
    record("causal_attention", {q, k, v}, out,
           [q, k, v, out = detach(out), lse, sc](const Tensor& g) {
             // the kernel adds into each gradient: fresh buffers are zeroed first
             std::optional<GradSink> sinks[3];
             const Tensor inputs[3] = {q, k, v};
             Tensor* targets[3] = {nullptr, nullptr, nullptr};
             for (int i = 0; i < 3; ++i) {
               if (!inputs[i].requires_grad()) continue;
               sinks[i].emplace(inputs[i],
                                std::vector<Tensor>{inputs[(i + 1) % 3], inputs[(i + 2) % 3]});
               sinks[i]->zero_if_fresh();
               targets[i] = &sinks[i]->buffer;
             }
             attention_backward(q, k, v, out, lse, g, sc, targets[0], targets[1], targets[2]);
             for (const auto& sink : sinks)
               if (sink) sink->finish();
           })
        .saves({q, k, v, out});  // the backward reads its output too
  if (tracing()) trace_op("causal_attention", {q, k, v}, {out}, {{"scale", sc}});
  return out;
}

// ---- attention_heads: q [B,T,H·hd], k v [B,T,Hkv·hd] -> [B,T,H·hd] -------------------------
// Heads are views: x [B,T,n·hd] seen as [B,n,T,hd] (strides T·n·hd, hd, n·hd, 1). With RoPE the
// rotated q and k are the only copies (contiguous [B,H,T,hd] and [B,Hkv,T,hd], saved for the
// backward, which rotates dq and dk back straight into the projections' gradients).
namespace {
Tensor split_heads(const Tensor& x, int64_t B, int64_t T, int64_t heads, int64_t hd) {
  return raw::view_permute(raw::view_reshape(x, {B, T, heads, hd}), {0, 2, 1, 3});
}
}  // namespace

namespace {
// attention_heads' sizes, scale and row layouts: q [B,T,H·hd] and k, v [B,T,Hkv·hd] read as
// rows (q_rows, kv_rows), and the contiguous [B,n,T,hd] copies RoPE writes (q_heads, kv_heads).
struct HeadsGeometry {
  int64_t B, T, H, Hkv, hd;
  bool use_rope;
  double sc;
  RowStrides q_rows, kv_rows, q_heads, kv_heads;
};

HeadsGeometry check_attention_heads(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    int64_t H, int64_t Hkv, double rope_base, double scale,
                                    const char* op) {
  check_arg(q_in.defined() && q_in.dim() == 3, op, q_in, "q of shape [B, T, heads·head_dim]");
  check_arg(H > 0 && Hkv > 0 && H % Hkv == 0, op, q_in,
            fmt::format("heads ({}) to be a positive multiple of kv_heads ({})", H, Hkv));
  const int64_t B = q_in.size(0), T = q_in.size(1);
  check_arg(q_in.size(2) % H == 0, op, q_in, fmt::format("a last axis divisible by heads {}", H));
  const int64_t hd = q_in.size(2) / H;
  check_arg(hd > 0, op, q_in, "a non-empty head dimension");
  for (const Tensor* t : {&k_in, &v_in}) {
    check_arg(t->defined() && t->shape() == Shape{B, T, Hkv * hd}, op, *t,
              fmt::format("k and v of shape [{}, {}, {}] (kv_heads {} · head_dim {})", B, T,
                          Hkv * hd, Hkv, hd));
    check_same_dtype(q_in, *t, op);
  }
  check_arg(is_floating(q_in.dtype()), op, q_in, "a float32 or float64 tensor");
  const bool use_rope = rope_base != 0.0;
  if (use_rope)
    check_arg(
        std::isfinite(rope_base) && rope_base > 0 && hd % 2 == 0, op, q_in,
        fmt::format("an even head dimension and a positive finite rope base (got hd {}, base {})",
                    hd, rope_base));
  const double sc = attention_scale(scale, hd, op);
  const RowStrides q_rows{T * H * hd, hd, H * hd}, kv_rows{T * Hkv * hd, hd, Hkv * hd};
  const RowStrides q_heads{H * T * hd, T * hd, hd}, kv_heads{Hkv * T * hd, T * hd, hd};
  return {B, T, H, Hkv, hd, use_rope, sc, q_rows, kv_rows, q_heads, kv_heads};
}

// What the backward reads: q and k as heads (rotated copies with RoPE), v and the output as
// heads, the row log-sum-exps [B, H, T] and the RoPE tables.
struct HeadsSaved {
  Tensor qr, kr, vh, out_h, lse;
  RopeTables tables;
};

// g [B,T,H·hd] into q's, k's and v's gradients: the attention kernel's backward, with RoPE in
// the rotated space first and then rotated back into the [B,T,n·hd] gradients.
void attention_heads_backward(const Tensor& g, const Tensor& q_in, const Tensor& k_in,
                              const Tensor& v_in, const HeadsGeometry& s, const HeadsSaved& saved) {
  const int64_t B = s.B, T = s.T, hd = s.hd;
  if (g.numel() == 0) {
    for (const Tensor& t : {q_in, k_in, v_in})
      if (t.requires_grad()) grad_of(t);
    return;
  }
  const Tensor gh = split_heads(g.contiguous(), B, T, s.H, hd);
  const Tensor inputs[3] = {q_in, k_in, v_in};
  const int64_t heads[3] = {s.H, s.Hkv, s.Hkv};
  auto others = [&](int i) {
    return std::vector<Tensor>{inputs[(i + 1) % 3], inputs[(i + 2) % 3]};
  };
  std::optional<GradSink> sinks[3];
  // input i's gradient seen as heads, zeroed when fresh (the kernel adds into it)
  auto grad_heads = [&](int i) {
    sinks[i].emplace(inputs[i], others(i));
    sinks[i]->zero_if_fresh();
    return split_heads(sinks[i]->buffer, B, T, heads[i], hd);
  };
  Tensor dq, dk, dv;
  if (v_in.requires_grad()) dv = grad_heads(2);
  if (s.use_rope) {  // dq, dk in the rotated space first
    if (q_in.requires_grad()) dq = Tensor::zeros({B, s.H, T, hd}, saved.qr.dtype());
    if (k_in.requires_grad()) dk = Tensor::zeros({B, s.Hkv, T, hd}, saved.qr.dtype());
  } else {
    if (q_in.requires_grad()) dq = grad_heads(0);
    if (k_in.requires_grad()) dk = grad_heads(1);
  }
  attention_backward(saved.qr, saved.kr, saved.vh, saved.out_h, saved.lse, gh, s.sc,
                     dq.defined() ? &dq : nullptr, dk.defined() ? &dk : nullptr,
                     dv.defined() ? &dv : nullptr);
  if (s.use_rope) {  // rotate back into the [B,T,n·hd] gradients (written when fresh)
    auto rotate_back = [&](int i, const Tensor& d, RowStrides rows, RowStrides from) {
      const GradSink& sink = sinks[i].emplace(inputs[i], others(i));
      dispatch_float(d.dtype(), "attention_heads", [&]<class Tp>() {
        rope_rows<Tp>(sink.data<Tp>(), rows, d.data<Tp>(), from, saved.tables.cos.data<Tp>(),
                      saved.tables.sin.data<Tp>(), B, heads[i], T, hd, true, sink.fresh);
      });
    };
    if (dq.defined()) rotate_back(0, dq, s.q_rows, s.q_heads);
    if (dk.defined()) rotate_back(1, dk, s.kv_rows, s.kv_heads);
  }
  for (const auto& sink : sinks)
    if (sink) sink->finish();
}
}  // namespace

Tensor attention_heads(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, int64_t H,
                       int64_t Hkv, double rope_base, double scale) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const char* op = "attention_heads";
  const HeadsGeometry s = check_attention_heads(q_in, k_in, v_in, H, Hkv, rope_base, scale, op);
  const int64_t B = s.B, T = s.T, hd = s.hd;
  const DType dtype = q_in.dtype();
  const Tensor q = kernel_input(q_in), k = kernel_input(k_in), v = kernel_input(v_in);
  HeadsSaved saved;
  saved.qr = split_heads(q, B, T, H, hd);
  saved.kr = split_heads(k, B, T, Hkv, hd);
  if (s.use_rope && q.numel() > 0) {
    saved.tables = rope_tables_for(T, hd, rope_base, 0, dtype);
    saved.qr = Tensor::empty({B, H, T, hd}, dtype);
    saved.kr = Tensor::empty({B, Hkv, T, hd}, dtype);
    dispatch_float(dtype, op, [&]<class Tp>() {
      const Tp* c = saved.tables.cos.data<Tp>();
      const Tp* sn = saved.tables.sin.data<Tp>();
      rope_rows<Tp>(saved.qr.data<Tp>(), s.q_heads, q.data<Tp>(), s.q_rows, c, sn, B, H, T, hd,
                    false, true);
      rope_rows<Tp>(saved.kr.data<Tp>(), s.kv_heads, k.data<Tp>(), s.kv_rows, c, sn, B, Hkv, T, hd,
                    false, true);
    });
  }
  saved.vh = split_heads(v, B, T, Hkv, hd);
  Tensor out = Tensor::empty({B, T, H * hd}, dtype);
  saved.out_h = split_heads(out, B, T, H, hd);
  saved.lse = Tensor::empty({B, H, T}, dtype);
  if (out.numel() > 0)
    attention_forward(saved.qr, saved.kr, saved.vh, s.sc, saved.out_h, saved.lse);
  if (tracing())
    trace_op(op, {q_in, k_in, v_in}, {out},
             {{"heads", H}, {"kv_heads", Hkv}, {"rope_base", rope_base}, {"scale", s.sc}});
  if (!should_record({q_in, k_in, v_in})) return out;
  record(op, {q_in, k_in, v_in}, out, [q_in, k_in, v_in, s, saved](const Tensor& g) {
    attention_heads_backward(g, q_in, k_in, v_in, s, saved);
  }).saves({q_in, k_in, v_in, out});  // out_h, which the backward reads, is a view of out
  return out;
}

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
// data table: the attention family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> attention_op_cases() {
  // q, k, v from seeds; values in [-1.5, 1.5) so the softmax is neither flat nor one-hot.
  auto qkv = [](Shape qs, Shape ks) {
    return [=] {
      return std::vector<Tensor>{random_tensor(qs, 31, -1.5, 1.5).set_name("q"),
                                 random_tensor(ks, 32, -1.5, 1.5).set_name("k"),
                                 random_tensor(ks, 33, -1.5, 1.5).set_name("v")};
    };
  };
  using V = const std::vector<Tensor>&;
  auto one = [](Shape s, uint64_t seed, double lo = -1, double hi = 1) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, lo, hi).set_name("x")}; };
  };
  return {
      {"rope/[2,3,5,8] offset 3", one({2, 3, 5, 8}, 18),
       [](V in) { return rope(in[0], 10000.0, 3); }},
      {"rope/base 100", one({1, 2, 4, 6}, 19), [](V in) { return rope(in[0], 100.0, 0); }},
      {"causal_attention/mha", qkv({2, 2, 5, 4}, {2, 2, 5, 4}),
       [](V in) { return causal_attention(in[0], in[1], in[2]); }},
      {"causal_attention/gqa", qkv({1, 4, 6, 4}, {1, 2, 6, 4}),
       [](V in) { return causal_attention(in[0], in[1], in[2]); }},
      {"causal_attention/gqa,scale=0.7", qkv({1, 4, 3, 2}, {1, 1, 3, 2}),
       [](V in) { return causal_attention(in[0], in[1], in[2], 0.7); }},
      {"attention_heads/mha", qkv({2, 5, 8}, {2, 5, 8}),
       [](V in) { return attention_heads(in[0], in[1], in[2], 2, 2); }},
      {"attention_heads/gqa+rope", qkv({1, 6, 16}, {1, 6, 8}),
       [](V in) { return attention_heads(in[0], in[1], in[2], 4, 2, 10000.0); }},
      {"attention_heads/rope base 100, scale 0.7", qkv({2, 4, 12}, {2, 4, 12}),
       [](V in) { return attention_heads(in[0], in[1], in[2], 2, 2, 100.0, 0.7); }},
      {"attention_heads/q is k is v", qkv({1, 5, 8}, {1, 5, 8}),
       [](V in) { return attention_heads(in[0], in[0], in[0], 2, 2, 10000.0); }},
      {"attention_heads/k is v, no rope", qkv({1, 5, 8}, {1, 5, 4}),
       [](V in) { return attention_heads(in[0], in[1], in[1], 2, 1); }},
      // q given as [B, T, H, hd] and permuted to [B, H, T, hd]: the kernel reads the view in place
      {"causal_attention/permuted_q", qkv({1, 5, 2, 4}, {1, 2, 5, 4}),
       [](V in) {
         return causal_attention(permute(in[0], {0, 2, 1, 3}), in[1], in[2]);
       }},
  };
}

}  // namespace dg
