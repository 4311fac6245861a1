// The general-purpose layers of any network: Embedding, Dropout, Linear, RMSNorm, LayerNorm,
// Norm, causal self-attention (MHA or real grouped-query attention, RoPE optional) and the SwiGLU
// and GELU feed-forward. Each layer only composes ops from autograd/ops.h, so gradients come from
// the ops' backwards; layers hold parameters, not activations. Convolutional layers live in
// nn/vision_layers.h, torch's transformer modules in nn/transformer.h, recurrent ones in
// nn/recurrent.h; a language model's own parts in nn/lm/.
// Linear and Embedding draw torch's default init from dg::default_generator() (nn/init.h);
// norms start at ones/zeros. A model that initialises its weights itself builds its layers under
// init::SkipGuard (no draws) and then draws every weight in its own documented order.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"
#include "tensor/rng.h"

namespace dg {

class Embedding : public Module {
 public:
  // padding_idx (torch's): that row starts at zero and gets no gradient; negative counts from
  // vocab.
  Embedding(int64_t vocab, int64_t dim, DType dtype = get_default_dtype(),
            std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& ids) const override;  // ids int64 or int32 [..] -> [.., dim]
  std::string extra_repr() const override;           // torch's text
  Tensor weight;                                     // [vocab, dim]
  std::optional<int64_t> padding_idx;                // in [0, vocab) once constructed
};

// Zeroes each element with probability p and scales the rest by 1/(1 − p) while training; the
// identity in eval mode (module.eval()), as torch.nn.Dropout. The mask is drawn from `generator`,
// or from dg::default_generator() when none is given (re-seeded by dg::manual_seed).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, TorchGenerator* generator = nullptr);
  Tensor forward(const Tensor& x) const override;  // x [..] -> [..]
  std::string extra_repr() const override;         // torch's text
  double p;

 private:
  TorchGenerator* generator_;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;  // x [.., in] -> [.., out]
  std::string extra_repr() const override;         // torch's text
  // True when forward(x) is exactly linear(x, weight, bias): no forward hooks, no unmerged LoRA
  // adapter and no quantized weight (nothing else changes what the layer computes). Fused callers
  // (linear_rope, linear_add, the LM head's linear_cross_entropy, cached decoding) read `weight`
  // themselves only then, and otherwise call forward().
  bool plain() const {
    return !has_forward_hooks() && !(lora && !lora->merged) && !quantized_weight;
  }
  int64_t in_features, out_features;
  Tensor weight;  // [out, in]; undefined once quantized
  Tensor bias;    // [out] or undefined
  // A LoRA adapter (nn/lora.h: lora::apply sets it): forward adds scale · B(A(dropout(x))).
  struct LoRA {
    const Linear* A = nullptr;         // lora_A [r, in]: this layer's child, or a shared adapter's
    const Linear* B = nullptr;         // lora_B [out, r]: this layer's child
    const Dropout* dropout = nullptr;  // lora_dropout, or null (p = 0)
    double scale = 1;                  // alpha / r (alpha / √r with rsLoRA)
    bool merged = false;               // weight holds W + scale·B·A; forward is the plain linear
  };
  std::optional<LoRA> lora;
  // The frozen weight in bf16 or int8, set by quantize_frozen (nn/quantize.h): then `weight` is
  // undefined and forward() runs quantized_linear (no weight gradient).
  std::shared_ptr<const QuantizedMatrix> quantized_weight;
};

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch 2.4's RMSNorm text
  double eps;
  Tensor weight;  // [dim], ones
};

class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // torch's text
  double eps;
  Tensor weight, bias;  // [dim] ones, zeros
};

// RMSNorm or LayerNorm behind one interface, chosen by the model config.
class Norm : public Module {
 public:
  enum class Kind { rms, layer };
  Norm(Kind kind, int64_t dim, double eps, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;
  std::string extra_repr() const override;  // "rms, (dim,), eps=..."
  Kind kind;
  double eps;
  Tensor weight, bias;
};

struct AttentionConfig {
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t kv_heads = 4;  // < heads: grouped-query attention (K/V heads shared by groups)
  bool rope = true;
  double rope_base = 10000.0;
  bool bias = false;
};

// Causal self-attention. forward(u_qk, u_v): Q and K are projected from u_qk, V from u_v
// (the same tensor in a standard block). Head h of Q reads K/V head h / (heads / kv_heads).
// With a residual [B, T, D] the result is residual + attention, added inside the output
// projection (linear_add).
DG_OTHER_FORWARD_BEGIN
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const AttentionConfig& config, DType dtype = get_default_dtype());
  // [B, T, D] -> [B, T, D]
  Tensor forward(const Tensor& u_qk, const Tensor& u_v, const Tensor& residual = Tensor()) const;
  Tensor operator()(const Tensor& u_qk, const Tensor& u_v,
                    const Tensor& residual = Tensor()) const {
    return forward(u_qk, u_v, residual);
  }
  AttentionConfig config;
  int64_t head_dim;
  Linear *q, *k, *v, *output;
};
DG_OTHER_FORWARD_END

// SwiGLU: down(silu(gate(x)) ⊙ up(x)); GELU: down(gelu(up(x))) (no gate), with the exact gelu
// or its tanh approximation (gelu_tanh, GPT-2's). With a residual, residual + that, added inside
// the down projection (linear_add).
DG_OTHER_FORWARD_BEGIN
class FeedForward : public Module {
 public:
  enum class Kind { swiglu, gelu, gelu_tanh };
  FeedForward(Kind kind, int64_t dim, int64_t hidden, bool bias, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& residual = Tensor()) const {
    return forward(x, residual);
  }
  Kind kind;
  Linear *up, *gate, *down;  // gate is null for the GELUs
};
DG_OTHER_FORWARD_END

}  // namespace dg
