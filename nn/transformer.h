// torch.nn's encoder-side transformer modules, with torch's constructor arguments, parameter names
// (a torch state dict loads with load_state_dict) and initialisation: MultiheadAttention,
// TransformerEncoderLayer and TransformerEncoder. Attention runs through the fused
// scaled_dot_product_attention op, or, when the attention weights are asked for or dropped out,
// through its plain twin (attention_weights, then matmul with v).
// Refuses: add_bias_kv, add_zero_attn, nested tensors and the decoder
// modules. Differences from torch: a query row with no key gives zeros, not NaN (see
// scaled_dot_product_attention in autograd/ops.h). Masks are bool (True = not attended, torch's
// polarity for these modules) or floating (added); integer and uint8 masks are refused.
#pragma once
#include <cstdint>
#include <optional>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace dg {

struct MultiheadAttentionOutput {
  Tensor output;   // [L, N, E], or [N, L, E] with batch_first
  Tensor weights;  // [N, L, S] averaged over heads, [N, heads, L, S] if not; undefined without
};

// MultiheadAttention's out_proj: a Linear under torch's class name (repr prints it).
class NonDynamicallyQuantizableLinear : public Linear {
 public:
  using Linear::Linear;
};

// torch.nn.MultiheadAttention. Parameters (torch's names): in_proj_weight [3E, E] (rows: q, k, v),
// or, when kdim or vdim differ from E, q_proj_weight [E, E], k_proj_weight [E, kdim] and
// v_proj_weight [E, vdim]; in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E]. Init as
// torch's: out_proj draws Linear's default, then xavier_uniform_ on in_proj_weight (or on the
// q, k, v weights in turn), then both biases are zeroed (the same order of draws, so a seeded init
// gives torch's float32 values).
DG_OTHER_FORWARD_BEGIN
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false, std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, DType dtype = get_default_dtype());
  // query [L, N, E], key [S, N, kdim], value [S, N, vdim] ([N, L, E], ... with batch_first), or
  // unbatched [L, E], [S, kdim], [S, vdim] with key_padding_mask [S] (output [L, E], weights
  // [L, S] or [heads, L, S]).
  // key_padding_mask [N, S]: bool True = that key is ignored (key_padding_mask = ids == PAD is
  // dg::eq(ids, PAD)), or floating, added. attn_mask [L, S] or [N·heads, L, S]: bool True = not
  // allowed (the OPPOSITE of scaled_dot_product_attention's bool mask), or floating, added.
  // Dropout (training, p > 0) drops attention weights, as torch. Forward hooks see the five
  // tensor arguments and the output (not the weights).
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask = Tensor(),
                                   bool need_weights = true, const Tensor& attn_mask = Tensor(),
                                   bool average_attn_weights = true) const;
  MultiheadAttentionOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const Tensor& key_padding_mask = Tensor(),
                                      bool need_weights = true, const Tensor& attn_mask = Tensor(),
                                      bool average_attn_weights = true) const {
    return forward(query, key, value, key_padding_mask, need_weights, attn_mask,
                   average_attn_weights);
  }
  int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  double dropout;
  bool batch_first;
  Tensor in_proj_weight;                               // undefined when kdim or vdim differ
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;  // defined only then
  Tensor in_proj_bias;                                 // undefined without bias
  Linear* out_proj;
};
DG_OTHER_FORWARD_END

// torch.nn.TransformerEncoderLayer's arguments (torch's defaults).
struct TransformerEncoderLayerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  enum class Activation { relu, gelu } activation = Activation::relu;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
};

// torch.nn.TransformerEncoderLayer: children self_attn, linear1, dropout, linear2, norm1, norm2,
// dropout1, dropout2 (torch's names and order). Post-norm: x = norm1(x + sa(x)), x = norm2(x +
// ff(x)); norm_first: x = x + sa(norm1(x)), x = x + ff(norm2(x)); ff = linear2(dropout(act(
// linear1(x)))). Always the plain path (torch's fused inference fast path gives the same values).
DG_OTHER_FORWARD_BEGIN
class TransformerEncoderLayer : public Module {
 public:
  using Options = TransformerEncoderLayerOptions;
  explicit TransformerEncoderLayer(const Options& options, DType dtype = get_default_dtype());
  // src [S, N, E] ([N, S, E] with batch_first); masks as MultiheadAttention's attn_mask and
  // key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor()) const;
  Tensor operator()(const Tensor& src, const Tensor& src_mask = Tensor(),
                    const Tensor& src_key_padding_mask = Tensor()) const {
    return forward(src, src_mask, src_key_padding_mask);
  }
  Options options;
  MultiheadAttention* self_attn;
  Linear *linear1, *linear2;
  Dropout *dropout, *dropout1, *dropout2;
  LayerNorm *norm1, *norm2;
};
DG_OTHER_FORWARD_END

// torch.nn.TransformerEncoder: `layers` (a ModuleList of num_layers layers) and an optional final
// `norm` (LayerNorm(d_model, layer_norm_eps)). As torch's deep copies, every layer starts with the
// first layer's values.
DG_OTHER_FORWARD_BEGIN
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayerOptions& layer, int64_t num_layers,
                     bool final_norm = false, DType dtype = get_default_dtype());
  Tensor forward(const Tensor& src, const Tensor& mask = Tensor(),
                 const Tensor& src_key_padding_mask = Tensor()) const;
  Tensor operator()(const Tensor& src, const Tensor& mask = Tensor(),
                    const Tensor& src_key_padding_mask = Tensor()) const {
    return forward(src, mask, src_key_padding_mask);
  }
  ModuleList* layers;
  LayerNorm* norm;  // null without final_norm
};
DG_OTHER_FORWARD_END

}  // namespace dg
