// The general-purpose layers (see layers.h): their constructors, forwards and torch repr texts.
#include "nn/layers.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "nn/init.h"
#include "tensor/quantized_matrix.h"

namespace dg {

// torch's defaults: Embedding N(0, 1); Linear weight kaiming_uniform_(a = √5), i.e.
// U(-1/√in, 1/√in), then its bias U(-1/√in, 1/√in). Skipped under init::SkipGuard.
Embedding::Embedding(int64_t vocab, int64_t dim, DType dtype, std::optional<int64_t> padding_idx)
    : Module(dtype), padding_idx(padding_idx) {
  if (padding_idx && (*padding_idx < -vocab || *padding_idx >= vocab))
    throw std::invalid_argument(fmt::format("Embedding: padding_idx {} is out of range [{}, {})",
                                            *padding_idx, -vocab, vocab));
  if (padding_idx && *padding_idx < 0) this->padding_idx = *padding_idx + vocab;
  weight = register_parameter("weight", Tensor::zeros({vocab, dim}, dtype));
  if (!init::skipping()) init::normal_(weight);
  if (this->padding_idx && !init::skipping())  // torch zeroes the padding row after drawing
    raw::view_narrow(weight, 0, *this->padding_idx, 1).fill(0.0);
}
Tensor Embedding::forward(const Tensor& ids) const {
  return hooked([&](const Tensor& ids) { return embedding(weight, ids, padding_idx); }, ids);
}

Dropout::Dropout(double p, TorchGenerator* generator) : p(p), generator_(generator) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(fmt::format("Dropout: p must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        return dropout(x, p, is_training(), generator_ ? *generator_ : default_generator());
      },
      x);
}

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype)
    : Module(dtype), in_features(in), out_features(out) {
  weight = register_parameter("weight", Tensor::zeros({out, in}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out}, dtype));
  if (init::skipping()) return;
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias && in > 0) {
    const double bound = 1 / std::sqrt(static_cast<double>(in));
    init::uniform_(bias, -bound, bound);
  }
}
Tensor Linear::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        const Tensor y = quantized_weight ? quantized_linear(x, *quantized_weight, bias)
                                          : linear(x, weight, bias);
        if (!lora || lora->merged) return y;
        // y + scale · B(A(dropout(x))): the scale on A's narrow output, B's product added into y.
        const Tensor h = scale((*lora->A)(lora->dropout ? (*lora->dropout)(x) : x), lora->scale);
        return lora->B->plain() ? linear_add(y, h, lora->B->weight, Tensor())
                                : add(y, (*lora->B)(h));
      },
      x);
}

RMSNorm::RMSNorm(int64_t dim, double eps_, DType dtype) : Module(dtype), eps(eps_) {
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
}
Tensor RMSNorm::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return rms_norm(x, weight, eps); }, x);
}

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : Module(dtype), eps(eps_) {
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
  bias = register_parameter("bias", Tensor::zeros({dim}, dtype));
}
Tensor LayerNorm::forward(const Tensor& x) const {
  return hooked([&](const Tensor& x) { return layer_norm(x, weight, bias, eps); }, x);
}

Norm::Norm(Kind kind_, int64_t dim, double eps_, DType dtype)
    : Module(dtype), kind(kind_), eps(eps_) {
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
  if (kind == Kind::layer) bias = register_parameter("bias", Tensor::zeros({dim}, dtype));
}
Tensor Norm::forward(const Tensor& x) const {
  return hooked(
      [&](const Tensor& x) {
        return kind == Kind::rms ? rms_norm(x, weight, eps) : layer_norm(x, weight, bias, eps);
      },
      x);
}

CausalSelfAttention::CausalSelfAttention(const AttentionConfig& c, DType dtype)
    : Module(dtype), config(c) {
  if (c.heads <= 0 || c.dim % c.heads != 0)
    throw std::invalid_argument(
        fmt::format("attention: dim {} is not divisible by heads {}", c.dim, c.heads));
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0)
    throw std::invalid_argument(
        fmt::format("attention: heads {} is not divisible by kv_heads {}", c.heads, c.kv_heads));
  head_dim = c.dim / c.heads;
  if (c.rope && head_dim % 2 != 0)
    throw std::invalid_argument(
        fmt::format("attention: RoPE needs an even head dimension, got {}", head_dim));
  const int64_t kv_dim = c.kv_heads * head_dim;
  q = &register_module("q", std::make_unique<Linear>(c.dim, c.dim, c.bias, dtype));
  k = &register_module("k", std::make_unique<Linear>(c.dim, kv_dim, c.bias, dtype));
  v = &register_module("v", std::make_unique<Linear>(c.dim, kv_dim, c.bias, dtype));
  output = &register_module("output", std::make_unique<Linear>(c.dim, c.dim, c.bias, dtype));
}

namespace {
// y [B, T, heads·hd] -> y with RoPE on each head: what linear_rope fuses after its projection,
// written as plain_linear_rope does (for a projection whose forward hooks must run).
Tensor rope_heads(const Tensor& y, int64_t heads, double base) {
  const int64_t out_features = y.size(-1), hd = out_features / heads;
  const int64_t T = y.size(-2), B = T ? y.numel() / (T * out_features) : 0;
  const Tensor split = permute(reshape(y, {B, T, heads, hd}), {0, 2, 1, 3});  // [B, heads, T, hd]
  return reshape(permute(rope(split, base), {0, 2, 1, 3}), y.shape());
}
// residual + layer(x): fused into one op (linear_add) when the layer is plain.
Tensor linear_plus(const Tensor& residual, const Tensor& x, const Linear& layer) {
  if (!layer.plain()) return add(residual, layer.forward(x));
  return linear_add(residual, x, layer.weight, layer.bias);
}
}  // namespace

// u_qk, u_v [B, T, D] -> [B, T, D] (+ residual). The projections stay [B, T, heads·hd]: RoPE is
// applied inside the Q and K projections (linear_rope, so the unrotated projections are not
// kept) and attention_heads reads and writes the heads in that layout, so no split/merge copies
// are made. Projections run in a fixed order (q, k, v) so the tape, and the order in which
// gradients are added into u_qk, does not depend on argument evaluation order. A projection with
// forward hooks runs its own forward (and the rotation after it), so its hooks fire.
Tensor CausalSelfAttention::forward(const Tensor& u_qk, const Tensor& u_v,
                                    const Tensor& residual) const {
  auto body = [&](const Tensor& u_qk, const Tensor& u_v, const Tensor& residual) {
    const int64_t H = config.heads, Hkv = config.kv_heads;
    auto project = [&](const Linear* l, const Tensor& u, int64_t n) {
      if (!config.rope) return (*l)(u);
      if (!l->plain()) return rope_heads(l->forward(u), n, config.rope_base);
      return linear_rope(u, l->weight, l->bias, n, config.rope_base);
    };
    const Tensor qp = project(q, u_qk, H);
    const Tensor kp = project(k, u_qk, Hkv);
    const Tensor vp = (*v)(u_v);
    const Tensor merged = attention_heads(qp, kp, vp, H, Hkv);  // [B, T, H·hd]
    return residual.defined() ? linear_plus(residual, merged, *output) : (*output)(merged);
  };
  return hooked(body, u_qk, u_v, residual);
}

FeedForward::FeedForward(Kind kind_, int64_t dim, int64_t hidden, bool bias, DType dtype)
    : Module(dtype), kind(kind_), gate(nullptr) {
  up = &register_module("up", std::make_unique<Linear>(dim, hidden, bias, dtype));
  if (kind == Kind::swiglu)
    gate = &register_module("gate", std::make_unique<Linear>(dim, hidden, bias, dtype));
  down = &register_module("down", std::make_unique<Linear>(hidden, dim, bias, dtype));
}

Tensor FeedForward::forward(const Tensor& x, const Tensor& residual) const {
  auto body = [&](const Tensor& x, const Tensor& residual) {
    Tensor hidden;
    if (kind == Kind::swiglu) {
      const Tensor g = (*gate)(x);
      hidden = swiglu(g, (*up)(x));
    } else if (kind == Kind::gelu) {
      hidden = gelu((*up)(x));
    } else {
      hidden = gelu_tanh((*up)(x));
    }
    return residual.defined() ? linear_plus(residual, hidden, *down) : (*down)(hidden);
  };
  return hooked(body, x, residual);
}

// ---- torch's extra_repr texts ------------------------------------------------------------------
std::string Embedding::extra_repr() const {
  std::string s = fmt::format("{}, {}", weight.size(0), weight.size(1));
  if (padding_idx) s += fmt::format(", padding_idx={}", *padding_idx);
  return s;
}
std::string Dropout::extra_repr() const { return "p=" + repr_float(p) + ", inplace=False"; }
std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features,
                     repr_bool(bias.defined()));
}
std::string RMSNorm::extra_repr() const {
  return fmt::format("({},), eps={}, elementwise_affine=True", weight.size(0), repr_float(eps));
}
std::string LayerNorm::extra_repr() const {
  return fmt::format("({},), eps={}, elementwise_affine=True", weight.size(0), repr_float(eps));
}
std::string Norm::extra_repr() const {
  return fmt::format("{}, ({},), eps={}", kind == Kind::rms ? "rms" : "layer", weight.size(0),
                     repr_float(eps));
}

}  // namespace dg
