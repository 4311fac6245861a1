// Fused causal scaled-dot-product attention, forward beside backward (kernels in
// tensor/kernels_attention.h). The tape keeps q, k, v, the output and one logsumexp per query
// row (B·H·T values); the backward recomputes the T×T probabilities block by block.
// Does not do: other masks, dropout, a KV cache (query and key lengths must be equal).
#include <fmt/format.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/kernels_attention.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// Where the backward adds an input's gradient: grad_of(x) itself when the kernel may write it
// (contiguous, and not shared with another input of the same call), else a zeroed scratch
// tensor that is accumulated afterwards.
struct GradTarget {
  Tensor input, target;
  bool scratch = false;
};

GradTarget grad_target(const Tensor& x, const std::vector<Tensor>& others) {
  GradTarget t{x, Tensor(), false};
  if (!x.requires_grad()) return t;
  bool aliased = false;
  for (const Tensor& o : others) aliased = aliased || (o.same(x) && o.requires_grad());
  Tensor g = grad_of(x);
  if (!aliased && g.is_contiguous()) {
    t.target = g;
  } else {
    t.target = Tensor::zeros(x.shape(), x.dtype());
    t.scratch = true;
  }
  return t;
}
}  // namespace

// ---- causal_attention: q [B,H,T,hd], k v [B,Hkv,T,hd] -> [B,H,T,hd] -------------------------
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  ScopedOpTimer op_timer(OpFamily::attention);
  const AttentionShape s = attention_shape(q, k, v, "causal_attention");
  const double sc = attention_scale(scale, s.hd, "causal_attention");
  // Written as [B,T,H,hd] and returned as its [B,H,T,hd] view: the caller's merge of the heads
  // (permute back, reshape to [B,T,H·hd]) is then a view, not a copy.
  Tensor out = Tensor::empty({s.B, s.T, s.H, s.hd}, q.dtype()).view_permute({0, 2, 1, 3});
  Tensor lse = Tensor::empty({s.B, s.H, s.T}, q.dtype());
  attention_forward(q, k, v, sc, out, lse);
  if (should_record({q, k, v}))
    record("causal_attention", {q, k, v}, out, [q, k, v, out, lse, sc](const Tensor& g) {
      GradTarget tq = grad_target(q, {k, v}), tk = grad_target(k, {q, v}),
                 tv = grad_target(v, {q, k});
      auto ptr = [](GradTarget& t) { return t.target.defined() ? &t.target : nullptr; };
      attention_backward(q, k, v, out, lse, g, sc, ptr(tq), ptr(tk), ptr(tv));
      for (GradTarget* t : {&tq, &tk, &tv})
        if (t->scratch) accumulate_grad(t->input, t->target);
    });
  return out;
}

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
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
  return {
      {"causal_attention/mha", qkv({2, 2, 5, 4}, {2, 2, 5, 4}),
       [](V in) { return causal_attention(in[0], in[1], in[2]); }},
      {"causal_attention/gqa", qkv({1, 4, 6, 4}, {1, 2, 6, 4}),
       [](V in) { return causal_attention(in[0], in[1], in[2]); }},
      {"causal_attention/gqa,scale=0.7", qkv({1, 4, 3, 2}, {1, 1, 3, 2}),
       [](V in) { return causal_attention(in[0], in[1], in[2], 0.7); }},
      // q given as [B, T, H, hd] and permuted to [B, H, T, hd]: the kernel reads the view in place
      {"causal_attention/permuted_q", qkv({1, 5, 2, 4}, {1, 2, 5, 4}),
       [](V in) {
         return causal_attention(permute(in[0], {0, 2, 1, 3}), in[1], in[2]);
       }},
  };
}

}  // namespace dg
