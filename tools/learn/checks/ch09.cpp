// Chapter 9's exercises and their checks (nn/learn-09-attention-gpt.md): causal_mask, graded
// through plain_causal_attention (values against PyTorch's, the future must not leak, the
// gradient check, equality with the fused causal_attention), and pre_norm_block, graded through
// a standard-mode MicroBlock and MicroLM (its formula from the block's own layers, the gradient
// check, a tiny GPT that must learn a repeated sentence). The goldens come from
// tools/learn/goldens_ch09.py. It does not grade the fused kernels: the chapter reads them.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "tools/learn/checks/sentence_lm.h"
#include "tools/learn/grade.h"
#include "train/optim.h"

namespace dg::learn {

namespace {

// float64 [shape] with x[i] = sin(0.37·i + offset), row-major (the golden script's inputs).
Tensor filled(const Shape& shape, double offset, bool requires_grad = false) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = std::sin(0.37 * static_cast<double>(i) + offset);
  return Tensor::from_vector(values, shape, DType::f64).set_requires_grad(requires_grad);
}

// PyTorch 1.13: softmax(q·kᵀ/sqrt(3) + causal mask)·v, q [1,2,4,3], k v [1,1,4,3] (two query
// heads share the kv head), from tools/learn/goldens_ch09.py.
const std::vector<double> kCausalAttentionGolden = {
    0.909297426825682,  0.697277738259938,  0.390884778898452,  0.596090485057049,
    0.329989815082779,  0.0192265716892584, 0.282813622529379,  0.0292824805011181,
    -0.228211907892644, -0.577481261388695, -0.557277754027382, -0.461649316966588,
    0.909297426825682,  0.697277738259938,  0.390884778898452,  0.456010650519018,
    0.165722601795791,  -0.146995223640627, 0.421004850273315,  0.168861120334771,
    -0.106137170077759, 0.439708460609188,  0.196901367305372,  -0.0725554023571564};

Verdict attention_against_torch() {
  const Tensor out = plain_causal_attention(filled({1, 2, 4, 3}, 0.0), filled({1, 1, 4, 3}, 1.0),
                                            filled({1, 1, 4, 3}, 2.0));
  return expect_values(out, kCausalAttentionGolden, {1, 2, 4, 3}, 1e-12, 1e-10,
                       "plain_causal_attention vs PyTorch");
}

// Changing the last position's key and value must leave the outputs of positions 0..T−2 as they
// were: a query never reads a later key.
Verdict future_does_not_leak() {
  const int64_t T = 5;
  const Tensor q = filled({1, 2, T, 4}, 0.0), k = filled({1, 2, T, 4}, 1.0);
  const Tensor v = filled({1, 2, T, 4}, 2.0);
  const Tensor before = plain_causal_attention(q, k, v);
  Tensor k2 = raw::clone(k), v2 = raw::clone(v);
  std::vector<double> kv = k2.to_vector(), vv = v2.to_vector();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 4; ++d) {
      kv[(h * T + T - 1) * 4 + d] += 3.0;
      vv[(h * T + T - 1) * 4 + d] -= 5.0;
    }
  const Tensor after = plain_causal_attention(q, Tensor::from_vector(kv, k.shape(), DType::f64),
                                              Tensor::from_vector(vv, v.shape(), DType::f64));
  const std::vector<double> a = before.to_vector(), b = after.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(a[i]))
      return {false,
              fmt::format("output element {} is {}: is a whole row of the mask −inf?", i, a[i])};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < 4; ++d) {
        const int64_t i = (h * T + t) * 4 + d;
        const bool moved = a[i] != b[i];
        if (t < T - 1 && moved)
          return {false, fmt::format("head {}, position {} changed from {:.9g} to {:.9g} when only "
                                     "position {}'s key and value changed: the future leaks",
                                     h, t, a[i], b[i], T - 1)};
        if (t == T - 1 && !moved && d == 0)
          return {false, fmt::format("head {}, position {} did not change when its own key and "
                                     "value changed: a query must see its own position",
                                     h, t)};
      }
  return {true, fmt::format("positions 0..{} unchanged, position {} changed", T - 2, T - 1)};
}

Verdict attention_gradients() {
  return gradient_check(
      "plain_causal_attention gqa",
      [](const std::vector<Tensor>& in) { return plain_causal_attention(in[0], in[1], in[2]); },
      {random_tensor({1, 4, 5, 3}, 91, -1.5, 1.5), random_tensor({1, 2, 5, 3}, 92, -1.5, 1.5),
       random_tensor({1, 2, 5, 3}, 93, -1.5, 1.5)});
}

Verdict plain_equals_fused() {
  const Tensor q = random_tensor({2, 2, 6, 4}, 94, -1.5, 1.5, false);
  const Tensor k = random_tensor({2, 2, 6, 4}, 95, -1.5, 1.5, false);
  const Tensor v = random_tensor({2, 2, 6, 4}, 96, -1.5, 1.5, false);
  return expect_close(plain_causal_attention(q, k, v), causal_attention(q, k, v), 1e-12, 1e-10,
                      "plain_causal_attention vs the fused causal_attention");
}

MicroLMConfig standard_config(int64_t vocab) {
  MicroLMConfig c;
  c.vocab = vocab, c.dim = 32, c.layers = 2, c.heads = 2, c.kv_heads = 2, c.seq_len = 16;
  c.expansion = 2;
  c.mode = residual_mode("standard");
  return c;
}

// y = x + FFN(N(x)) with x = c + Attn(N(c)), from the block's own layers, against the block.
Verdict block_formula() {
  MicroLMConfig config = standard_config(11);
  MicroLM model(config, DType::f64);
  model.init_identical(7);
  MicroBlock& block = *model.blocks[1];
  const Tensor c = filled({2, 5, 32}, 0.3);
  const Tensor u = block.attention_norm->forward(c);
  const Tensor x = add(c, block.attention->forward(u, u));
  const Tensor expected = add(x, block.ffn->forward(block.ffn_norm->forward(x)));
  return expect_close(
      block.forward({c}), expected, 1e-12, 1e-10,
      "block.forward({c}) vs x + FFN(ffn_norm(x)), x = c + Attn(attention_norm(c))");
}

Verdict block_gradients() {
  MicroLMConfig config = standard_config(11);
  config.dim = 8, config.expansion = 2;
  MicroBlock block(config, 0, DType::f64);
  std::vector<Tensor> inputs{random_tensor({2, 4, 8}, 97)};
  uint64_t seed = 98;
  for (Tensor p : block.parameters()) {  // small random weights, norm gains near one
    const bool gain = p.dim() == 1;
    const Tensor r = random_tensor(p.shape(), seed++, gain ? 0.7 : -0.4, gain ? 1.3 : 0.4, false);
    p.copy_from(r);
    inputs.push_back(p);
  }
  return gradient_check(
      "standard MicroBlock (c and every parameter)",
      [&](const std::vector<Tensor>& in) { return block.forward({in[0]}); }, inputs);
}

// A tiny GPT on a repeated sentence: from about ln(vocab) it must fall below 0.6 within 60 AdamW
// steps (the library's block: about 0.15).
Verdict tiny_gpt_learns() {
  const auto [first, last] = train_on_sentence(standard_config(28));
  return expect_true(
      std::isfinite(last) && last < 0.6,
      fmt::format("loss {:.4f} at step 1, {:.4f} at step 60 (must be below 0.6)", first, last));
}

}  // namespace

Chapter chapter() {
  return {
      9,
      "attention and a small GPT",
      "nn/learn-09-attention-gpt.md",
      {{"causal_mask",
        "autograd/ops_attention.cpp",
        {{"plain_causal_attention against PyTorch 1.13 (grouped-query, T 4)",
          attention_against_torch},
         {"the future does not leak: a change at the last position moves only that position",
          future_does_not_leak},
         {"gradcheck plain_causal_attention: q [1,4,5,3], k v [1,2,5,3]", attention_gradients},
         {"plain_causal_attention equals the fused causal_attention", plain_equals_fused}}},
       {"pre_norm_block",
        "nn/lm/residual/standard.cpp",
        {{"a standard block is x + FFN(N(x)), x = c + Attn(N(c))", block_formula},
         {"gradcheck a standard MicroBlock w.r.t. its input and every parameter", block_gradients},
         {"a tiny GPT learns a repeated sentence: loss below 0.6 in 60 steps", tiny_gpt_learns}}}}};
}

}  // namespace dg::learn
