// scaled_dot_product_attention with torch 2's F.scaled_dot_product_attention semantics (without
// dropout): q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev], batch axes broadcast, L
// and S free (self- or cross-attention), an optional mask (bool: True = the key takes part, as
// torch's; floating: added to the scores, and differentiable) or the causal top-left mask.
// First the plain composition (attention_weights, plain_scaled_dot_product_attention: matmul,
// softmax, masked add; read it first), then the fused op (kernels in tensor/kernels_sdpa.h), its
// forward beside its backward, then the gradient-check rows. A row whose every key is masked gives
// zeros (torch 1.13 to 2.4 give NaN there; see ops.h). Refuses: dropout, a mask together with
// is_causal (as torch), a floating mask of another dtype, an integer mask (torch 2 too), a
// zero-width E. Checks: the rows at the
// end, the kernels and torch 1.13 goldens in tests/test_sdpa_ops.cpp, the plain twin in
// tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "autograd/gradcheck.h"
#include "autograd/op_trace.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_sdpa.h"
#include "tensor/profile.h"

namespace dg {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Shape batch_axes(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }
Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// The checked arguments of one call: the broadcast batch axes and the scale.
struct SdpaArgs {
  Shape batch;
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
};

SdpaArgs check_sdpa(const Tensor& q, const Tensor& k, const Tensor* v, const Tensor& mask,
                    bool is_causal, std::optional<double> scale, const char* op) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("{}: {} (q {}, k {}, v {}, mask {})", op, why,
                                             q.describe(), k.describe(), v ? v->describe() : "none",
                                             mask.defined() ? mask.describe() : "none"));
  };
  for (const Tensor* t : {&q, &k, v}) {
    if (!t) continue;
    check_float(*t, op);
    check_arg(t->dim() >= 2, op, *t, "q [..., L, E], k [..., S, E] and v [..., S, Ev]");
    check_same_dtype(q, *t, op);
  }
  if (k.size(-1) != q.size(-1)) throw fail("q and k must have the same last axis E");
  if (v && v->size(-2) != k.size(-2)) throw fail("k and v must have the same length S");
  if (q.size(-1) == 0) throw fail("E must be positive (the default scale is 1/sqrt(E))");
  SdpaArgs a{batch_axes(q), q.size(-2), k.size(-2), q.size(-1), v ? v->size(-1) : 0, 1.0};
  for (const Tensor* t : {&k, v}) {
    if (!t) continue;
    try {
      a.batch = broadcast_shapes(a.batch, batch_axes(*t), op);
    } catch (const std::invalid_argument&) {
      throw fail("the batch axes of q, k and v do not broadcast");
    }
  }
  if (mask.defined()) {
    if (is_causal) throw fail("pass either a mask or is_causal, not both (as torch)");
    if (is_floating(mask.dtype()) && mask.dtype() != q.dtype())
      throw fail("a floating (additive) mask must have q's dtype");
    if (!is_floating(mask.dtype()) && mask.dtype() != DType::b8)
      throw std::invalid_argument(fmt::format(
          "{}: mask must be bool (True = the key takes part) or floating (added), got {} ({}); "
          "write dg::ne(mask, 0) or mask.to(DType::b8)",
          op, dtype_name(mask.dtype()), mask.describe()));
    const Shape target = with_matrix(a.batch, a.L, a.S);
    bool fits = mask.dim() <= static_cast<int64_t>(target.size());
    for (int64_t i = 1; fits && i <= mask.dim(); ++i) {
      const int64_t m = mask.size(-i), t = target[target.size() - i];
      fits = m == t || m == 1;
    }
    if (!fits) throw fail(fmt::format("the mask does not broadcast to {}", shape_str(target)));
  }
  if (scale && !std::isfinite(*scale)) throw fail(fmt::format("scale {} is not finite", *scale));
  a.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(a.E));
  return a;
}

// The mask as a tensor added to the scores: a floating mask itself, a bool one as 0 where a key
// takes part (True) and −inf elsewhere (a constant), the causal one as −inf above the diagonal.
Tensor additive_mask(const Tensor& mask, bool is_causal, int64_t L, int64_t S, DType dtype) {
  if (is_causal) {
    std::vector<double> hidden(L * S, 0.0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = i + 1; j < S; ++j) hidden[i * S + j] = kNegInf;
    return Tensor::from_vector(hidden, {L, S}, dtype);
  }
  if (!mask.defined() || is_floating(mask.dtype())) return mask;
  NoGradGuard no_grad;
  return masked_fill(Tensor::zeros(mask.shape(), dtype), logical_not(mask), kNegInf);
}

// softmax(q·kᵀ·scale + bias) over the keys, with 0 on rows whose every key is masked (−inf): the
// −inf of those rows are replaced by 0 before the softmax (so no NaN reaches a gradient) and the
// row is zeroed after it.
Tensor plain_probabilities(const Tensor& q, const Tensor& k, const Tensor& bias, double sc) {
  const Tensor scores = scale(matmul(q, transpose(k, -2, -1)), sc);  // [..., L, S]
  if (!bias.defined() || bias.size(-1) == 0) return softmax(scores, -1);
  Tensor dead;  // [..., L, 1]: true where the row has no key (a constant)
  {
    NoGradGuard no_grad;
    dead = eq(max(detach(bias), -1, true).values, kNegInf);
  }
  return masked_fill(softmax(add(scores, masked_fill(bias, dead, 0.0)), -1), dead, 0.0);
}
}  // namespace

// ---- the plain composition (read this first) ----------------------------------------------------
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, bool is_causal,
                         std::optional<double> scale) {
  const SdpaArgs a = check_sdpa(q, k, nullptr, mask, is_causal, scale, "attention_weights");
  const Tensor p =
      plain_probabilities(q, k, additive_mask(mask, is_causal, a.L, a.S, q.dtype()), a.scale);
  if (tracing())
    trace_op("attention_weights", {q, k, mask}, {p},
             {{"is_causal", is_causal}, {"scale", a.scale}});
  return p;
}

Tensor plain_scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& mask, bool is_causal,
                                          std::optional<double> scale) {
  const SdpaArgs a =
      check_sdpa(q, k, &v, mask, is_causal, scale, "plain_scaled_dot_product_attention");
  const Tensor bias = additive_mask(mask, is_causal, a.L, a.S, q.dtype());
  const Tensor out = matmul(plain_probabilities(q, k, bias, a.scale), v);  // [..., L, Ev]
  if (tracing())  // one op, as the fused one
    trace_op("scaled_dot_product_attention", {q, k, v, mask}, {out},
             {{"is_causal", is_causal}, {"scale", a.scale}});
  return out;
}

// ---- scaled_dot_product_attention: the fused op ------------------------------------------------
// Forward: the kernel over q, k, v and the mask expanded to the common batch axes (views, no
// copies), keeping out and one logsumexp per query row. Backward: the kernel writes dq, dk, dv
// (and dmask for a floating mask) at the full batch shape; accumulate_grad sums the broadcast
// axes. Under create_graph the backward is the formula written with recorded ops:
//   P = attention_weights(...), dV = Pᵀ·g, dP = g·Vᵀ, dS = P ∘ (dP − rowsum(dP ∘ P)),
//   dQ = scale·dS·K, dK = scale·dSᵀ·Q, dmask = dS.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, bool is_causal,
                                    std::optional<double> scale) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const char* op = "scaled_dot_product_attention";
  const SdpaArgs a = check_sdpa(q, k, &v, mask, is_causal, scale, op);
  const bool float_mask = mask.defined() && is_floating(mask.dtype());
  const Tensor bias = is_causal ? Tensor() : additive_mask(mask, false, a.L, a.S, q.dtype());
  SdpaInputs in{raw::view_expand(q, with_matrix(a.batch, a.L, a.E)),
                raw::view_expand(k, with_matrix(a.batch, a.S, a.E)),
                raw::view_expand(v, with_matrix(a.batch, a.S, a.Ev)),
                bias.defined() ? raw::view_expand(bias, with_matrix(a.batch, a.L, a.S)) : Tensor(),
                is_causal,
                a.scale};
  int64_t Bt = 1;
  for (int64_t n : a.batch) Bt *= n;
  Tensor out = Tensor::empty({Bt, a.L, a.Ev}, q.dtype());
  Tensor lse = Tensor::empty({Bt, a.L}, q.dtype());
  sdpa_forward(in, out, lse);
  out = raw::view_reshape(out, with_matrix(a.batch, a.L, a.Ev));
  if (tracing())
    trace_op(op, {q, k, v, mask}, {out}, {{"is_causal", is_causal}, {"scale", a.scale}});
  const Tensor m = float_mask ? mask : Tensor();
  if (!should_record({q, k, v, m})) return out;
  record(op, {q, k, v, m}, out,
         [q, k, v, m, in, saved = detach(out), lse, a, Bt](const Tensor& g) {
           const Tensor gc = raw::view_reshape(g.contiguous(), {Bt, a.L, a.Ev});
           const Tensor o = raw::view_reshape(saved, {Bt, a.L, a.Ev});
           Tensor dq, dk, dv, dm;
           auto make = [&](const Tensor& t, Tensor& d, int64_t rows, int64_t cols) {
             if (t.defined() && t.requires_grad()) d = Tensor::empty({Bt, rows, cols}, q.dtype());
           };
           make(q, dq, a.L, a.E);
           make(k, dk, a.S, a.E);
           make(v, dv, a.S, a.Ev);
           make(m, dm, a.L, a.S);
           sdpa_backward(in, o, lse, gc, dq.defined() ? &dq : nullptr, dk.defined() ? &dk : nullptr,
                         dv.defined() ? &dv : nullptr, dm.defined() ? &dm : nullptr);
           auto give = [&](const Tensor& t, const Tensor& d, int64_t rows, int64_t cols) {
             if (d.defined())
               accumulate_grad(t, raw::view_reshape(d, with_matrix(a.batch, rows, cols)));
           };
           give(q, dq, a.L, a.E);
           give(k, dk, a.S, a.E);
           give(v, dv, a.S, a.Ev);
           give(m, dm, a.L, a.S);
         })
      .saves({q, k, v, m, out})
      .differentiable([q, k, v, m, mask, is_causal, a](const Tensor& g, const Tensor&) {
        const Tensor bias = m.defined() ? m : additive_mask(mask, is_causal, a.L, a.S, q.dtype());
        const Tensor P = plain_probabilities(q, k, bias, a.scale);
        if (v.requires_grad()) accumulate_grad(v, matmul(transpose(P, -2, -1), g));
        if (!q.requires_grad() && !k.requires_grad() && !(m.defined() && m.requires_grad())) return;
        const Tensor dP = matmul(g, transpose(v, -2, -1));
        const Tensor dS = mul(P, sub(dP, sum(mul(dP, P), {-1}, true)));
        if (q.requires_grad()) accumulate_grad(q, dg::scale(matmul(dS, k), a.scale));
        if (k.requires_grad())
          accumulate_grad(k, dg::scale(matmul(transpose(dS, -2, -1), q), a.scale));
        if (m.defined() && m.requires_grad()) accumulate_grad(m, dS);
      });
  return out;
}

// ---- packed_self_attention: q, k, v side by side in one tensor ----------------------------------
// MultiheadAttention's self-attention after its one in-projection: qkv [N, L, 3·E] is read in
// place as q, k, v heads [N, H, L, hd] and the output is written with the heads merged, [N, L, E];
// the backward writes dq, dk, dv side by side into one [N, L, 3·E] gradient. The same kernels and
// bits as scaled_dot_product_attention on the split heads, without the split and merge copies.
namespace {
constexpr int64_t kPackedAttentionKeptProbs = int64_t(1) << 24;  // probabilities kept up to this

// The heads of part `part` of a contiguous [N, L, parts·H·hd] tensor as a [N, 1, H, L, hd] view.
Tensor packed_heads(const Tensor& t, int64_t parts, int64_t part, int64_t heads) {
  const int64_t N = t.size(0), L = t.size(1), hd = t.size(2) / (parts * heads);
  const Tensor split =
      raw::view_permute(raw::view_reshape(t, {N, L, parts, heads, hd}), {0, 2, 3, 1, 4});
  return raw::view_narrow(split, 1, part, 1);
}

// The packed op's gradient from recorded ops (create_graph): the split heads, the formula of
// scaled_dot_product_attention's differentiable backward, the merged result.
void packed_attention_grad(const Tensor& qkv, const Tensor& m, const Tensor& g, int64_t heads,
                           double sc) {
  const int64_t N = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, hd = E / heads;
  auto split = [&](const Tensor& t, int64_t part) {
    return permute(reshape(slice(t, 2, part * E, (part + 1) * E), {N, L, heads, hd}), {0, 2, 1, 3});
  };
  auto merge = [&](const Tensor& t) { return reshape(permute(t, {0, 2, 1, 3}), {N, L, E}); };
  const Tensor q = split(qkv, 0), k = split(qkv, 1), v = split(qkv, 2), go = split(g, 0);
  const Tensor P = plain_probabilities(q, k, m, sc);
  const Tensor dP = matmul(go, transpose(v, -2, -1));
  const Tensor dS = mul(P, sub(dP, sum(mul(dP, P), {-1}, true)));
  const Tensor dq = dg::scale(matmul(dS, k), sc),
               dk = dg::scale(matmul(transpose(dS, -2, -1), q), sc);
  if (qkv.requires_grad())
    accumulate_grad(qkv, cat({merge(dq), merge(dk), merge(matmul(transpose(P, -2, -1), go))}, 2));
  if (m.defined() && m.requires_grad()) accumulate_grad(m, dS);
}
}  // namespace

Tensor packed_self_attention(const Tensor& qkv, int64_t heads, const Tensor& mask) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const char* op = "packed_self_attention";
  check_float(qkv, op);
  check_arg(qkv.dim() == 3 && heads > 0 && qkv.size(2) % (3 * heads) == 0 && qkv.size(2) > 0, op,
            qkv, "[N, L, 3·E] with E a positive multiple of heads");
  const int64_t N = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, hd = E / heads;
  const Shape target{N, heads, L, L};
  bool mask_fits = !mask.defined() || (mask.dtype() == qkv.dtype() && mask.dim() <= 4);
  for (int64_t i = 1; mask_fits && mask.defined() && i <= mask.dim(); ++i)
    mask_fits = mask.size(-i) == target[4 - i] || mask.size(-i) == 1;
  check_arg(mask_fits, op, mask,
            "undefined or an additive mask of qkv's dtype that broadcasts to [N, heads, L, L]");
  const Tensor x = qkv.contiguous(), m = mask;
  Tensor heads_mask;  // [N, 1, heads, L, L], broadcast axes of stride 0
  if (m.defined()) {
    Shape five(5 - m.dim(), 1);
    for (int64_t a = 0; a < m.dim(); ++a) five.push_back(m.size(a));
    std::swap(five[0], five[1]);  // the part axis (1) is one of the added leading ones
    heads_mask = raw::view_expand(raw::view_reshape(m.contiguous(), five), {N, 1, heads, L, L});
  }
  const double sc = 1.0 / std::sqrt(static_cast<double>(hd));
  SdpaInputs in{packed_heads(x, 3, 0, heads),
                packed_heads(x, 3, 1, heads),
                packed_heads(x, 3, 2, heads),
                heads_mask,
                false,
                sc};
  Tensor out = Tensor::empty({N, L, E}, qkv.dtype());
  Tensor lse = Tensor::empty({N * heads, L}, qkv.dtype());
  Tensor out_heads = packed_heads(out, 1, 0, heads);
  const bool record_it = should_record({qkv, m});
  // The probabilities kept for the backward when they are small: reading them is faster than the
  // recomputation (a GEMM and an exp per score; encoder step N 32, L 128, H 8: 16 MB kept).
  Tensor probs;
  if (record_it && N * heads * L * L <= kPackedAttentionKeptProbs)
    probs = Tensor::empty({N * heads, L, L}, qkv.dtype());
  sdpa_forward(in, out_heads, lse, probs.defined() ? &probs : nullptr);
  if (tracing()) trace_op(op, {qkv, m}, {out}, {{"heads", heads}});
  if (!record_it) return out;
  record(op, {qkv, m}, out,
         [qkv, m, in, saved = detach(out), lse, probs, heads, N, L, E](const Tensor& g) {
           const Tensor gc = g.contiguous();
           Tensor dqkv = Tensor::empty({N, L, 3 * E}, qkv.dtype());
           Tensor dq = packed_heads(dqkv, 3, 0, heads), dk = packed_heads(dqkv, 3, 1, heads),
                  dv = packed_heads(dqkv, 3, 2, heads), dm;
           if (m.defined() && m.requires_grad()) dm = Tensor::empty({N * heads, L, L}, m.dtype());
           sdpa_backward(in, packed_heads(saved, 1, 0, heads), lse, packed_heads(gc, 1, 0, heads),
                         &dq, &dk, &dv, dm.defined() ? &dm : nullptr,
                         probs.defined() ? &probs : nullptr);
           if (qkv.requires_grad()) accumulate_grad(qkv, dqkv);
           if (dm.defined()) accumulate_grad(m, raw::view_reshape(dm, {N, heads, L, L}));
         })
      .saves({qkv, m, out})
      .differentiable([qkv, m, heads, sc](const Tensor& g, const Tensor&) {
        packed_attention_grad(qkv, m, g, heads, sc);
      });
  return out;
}

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
// data table: the sdpa family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> sdpa_op_cases() {
  using V = const std::vector<Tensor>&;
  // q, k, v (and a floating mask when mask_shape is given), values in [-1.5, 1.5)
  auto qkv = [](Shape qs, Shape ks, Shape vs, Shape mask_shape = {}) {
    return [=] {
      std::vector<Tensor> in{random_tensor(qs, 51, -1.5, 1.5).set_name("q"),
                             random_tensor(ks, 52, -1.5, 1.5).set_name("k"),
                             random_tensor(vs, 53, -1.5, 1.5).set_name("v")};
      if (!mask_shape.empty()) in.push_back(random_tensor(mask_shape, 54, -2, 2).set_name("mask"));
      return in;
    };
  };
  // a bool mask [L, S] = 3 x 5 with row 1 keeping one key and row 2 none (all false)
  auto keep = [] {
    return Tensor::from_vector(std::vector<bool>{1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
                               {3, 5});
  };
  return {
      {"scaled_dot_product_attention/self, no mask", qkv({2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 3}),
       [](V in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"scaled_dot_product_attention/cross L 3 S 5, Ev 2, boolean mask with an empty row",
       qkv({2, 3, 4}, {2, 5, 4}, {2, 5, 2}),
       [keep](V in) { return scaled_dot_product_attention(in[0], in[1], in[2], keep()); }},
      {"scaled_dot_product_attention/additive mask [2, 1, 3, 5] differentiated, scale 0.7",
       qkv({2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, {2, 1, 3, 5}),
       [](V in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3], false, 0.7); }},
      {"scaled_dot_product_attention/causal, L 5 > S 3", qkv({1, 5, 4}, {1, 3, 4}, {1, 3, 4}),
       [](V in) { return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), true); }},
      {"scaled_dot_product_attention/k, v broadcast over heads",
       qkv({2, 3, 4, 2}, {2, 1, 4, 2}, {4, 3}),
       [](V in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }},
      {"scaled_dot_product_attention/permuted q (read in place)",
       qkv({1, 4, 2, 3}, {1, 2, 4, 3}, {1, 2, 4, 3}),
       [](V in) {
         return scaled_dot_product_attention(permute(in[0], {0, 2, 1, 3}), in[1], in[2]);
       }},
      {"packed_self_attention/2 heads, no mask",
       [] {
         return std::vector<Tensor>{random_tensor({2, 3, 12}, 57, -1.5, 1.5).set_name("qkv")};
       },
       [](V in) { return packed_self_attention(in[0], 2); }},
      {"packed_self_attention/additive mask [2, 1, 3, 3] differentiated",
       [] {
         return std::vector<Tensor>{random_tensor({2, 3, 12}, 58, -1.5, 1.5).set_name("qkv"),
                                    random_tensor({2, 1, 3, 3}, 59, -2, 2).set_name("mask")};
       },
       [](V in) { return packed_self_attention(in[0], 2, in[1]); }},
      {"attention_weights/boolean mask",
       [] {
         return std::vector<Tensor>{random_tensor({2, 3, 4}, 55, -1.5, 1.5).set_name("q"),
                                    random_tensor({2, 5, 4}, 56, -1.5, 1.5).set_name("k")};
       },
       [keep](V in) { return attention_weights(in[0], in[1], keep()); }},
  };
}

}  // namespace dg
