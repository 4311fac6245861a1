// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder (see transformer.h).
#include "nn/transformer.h"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "autograd/op_trace.h"
#include "nn/init.h"

namespace dg {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void refuse(const Module& m, const char* kind, const std::string& why) {
  const std::string where = m.path().empty() ? "" : fmt::format(" '{}'", m.path());
  throw std::invalid_argument(fmt::format("{}{}: {}", kind, where, why));
}

// torch's mask conventions for MultiheadAttention: a bool mask's True entries are excluded (−inf),
// a floating mask is added as it is (it must have the module's dtype). Integer masks are refused
// (torch too); uint8 as well (torch 1.13 took a uint8 attn_mask with a deprecation warning, torch 2
// refuses it).
Tensor additive(const Module& m, const Tensor& mask, DType dtype, const char* name) {
  if (!mask.defined()) return mask;
  if (is_floating(mask.dtype())) {
    if (mask.dtype() != dtype)
      refuse(m, "MultiheadAttention",
             fmt::format("a floating {} must be {}, got {}", name, dtype_name(dtype),
                         mask.describe()));
    return mask;
  }
  if (mask.dtype() != DType::b8)
    refuse(m, "MultiheadAttention",
           fmt::format("{} must be bool (True = not attended) or floating (added), got {} ({}); "
                       "write dg::ne({}, 0) or {}.to(DType::b8)",
                       name, dtype_name(mask.dtype()), mask.describe(), name, name));
  NoGradGuard no_grad;  // −inf where True, else 0, shaped by the mask (an export follows its dims)
  return where(mask, Tensor::full({}, kNegInf, dtype), 0.0);
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, double dropout_,
                                       bool bias, bool batch_first_, std::optional<int64_t> kdim_,
                                       std::optional<int64_t> vdim_, DType dtype)
    : Module(dtype),
      embed_dim(embed_dim_),
      num_heads(num_heads_),
      head_dim(0),
      kdim(kdim_.value_or(embed_dim_)),
      vdim(vdim_.value_or(embed_dim_)),
      dropout(dropout_),
      batch_first(batch_first_) {
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
    refuse(*this, "MultiheadAttention",
           fmt::format("embed_dim {} must be a positive multiple of num_heads {}", embed_dim,
                       num_heads));
  if (kdim <= 0 || vdim <= 0)
    refuse(*this, "MultiheadAttention",
           fmt::format("kdim {} and vdim {} must be positive", kdim, vdim));
  if (!(dropout >= 0.0 && dropout <= 1.0))
    refuse(*this, "MultiheadAttention", fmt::format("dropout must be in [0, 1], got {}", dropout));
  head_dim = embed_dim / num_heads;
  const bool packed = kdim == embed_dim && vdim == embed_dim;
  if (packed) {
    in_proj_weight =
        register_parameter("in_proj_weight", Tensor::zeros({3 * embed_dim, embed_dim}, dtype));
  } else {
    q_proj_weight =
        register_parameter("q_proj_weight", Tensor::zeros({embed_dim, embed_dim}, dtype));
    k_proj_weight = register_parameter("k_proj_weight", Tensor::zeros({embed_dim, kdim}, dtype));
    v_proj_weight = register_parameter("v_proj_weight", Tensor::zeros({embed_dim, vdim}, dtype));
  }
  if (bias)
    in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * embed_dim}, dtype));
  // torch's order of draws: out_proj's Linear init, then xavier on in_proj_weight; biases zero
  out_proj = &register_module("out_proj", std::make_unique<NonDynamicallyQuantizableLinear>(
                                              embed_dim, embed_dim, bias, dtype));
  if (init::skipping()) return;
  for (const Tensor& w : {in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight})
    if (w.defined()) init::xavier_uniform_(w);
  if (bias) out_proj->bias.fill(0.0);
}

namespace {
// query, key and value 3-D [N, L, E] / [L, N, E] with last axes embed_dim, kdim, vdim and the
// module's dtype.
void check_mha_inputs(const MultiheadAttention& m, const Tensor& query, const Tensor& key,
                      const Tensor& value) {
  const int64_t widths[3] = {m.embed_dim, m.kdim, m.vdim};
  const Tensor* inputs[3] = {&query, &key, &value};
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = *inputs[i];
    if (!t.defined() || t.dim() != 3 || t.size(2) != widths[i] || t.dtype() != m.dtype())
      refuse(m, "MultiheadAttention",
             fmt::format("query, key and value must be 3-D (or all 2-D, unbatched) {} with last "
                         "axes embed_dim {}, "
                         "kdim {}, vdim {} ({}), got query {}, key {}, value {}",
                         dtype_name(m.dtype()), m.embed_dim, m.kdim, m.vdim,
                         m.batch_first ? "[N, L, E]" : "[L, N, E]", query.describe(),
                         key.describe(), value.describe()));
  }
}

// Projection `part` (0 q, 1 k, 2 v) of x [N, len, E], seen as heads [N, H, len, hd] (a view).
Tensor mha_project(const MultiheadAttention& m, const Tensor& x, int64_t part) {
  const int64_t N = x.size(0), E = m.embed_dim;
  const Tensor separate[3] = {m.q_proj_weight, m.k_proj_weight, m.v_proj_weight};
  const Tensor w = m.in_proj_weight.defined() ? slice(m.in_proj_weight, 0, part * E, (part + 1) * E)
                                              : separate[part];
  const Tensor b =
      m.in_proj_bias.defined() ? slice(m.in_proj_bias, 0, part * E, (part + 1) * E) : Tensor();
  const Tensor y = linear(x, w, b);
  return permute(reshape(y, {N, y.size(1), m.num_heads, m.head_dim}), {0, 2, 1, 3});
}

// attn_mask ([L, S] or [N·H, L, S]) and key_padding_mask ([N, S]) added together as one
// [N, H or 1, L, S] additive mask (undefined when neither is given).
Tensor mha_mask(const MultiheadAttention& m, const Tensor& attn_mask,
                const Tensor& key_padding_mask, int64_t N, int64_t L, int64_t S) {
  const char* kind = "MultiheadAttention";
  const int64_t H = m.num_heads;
  Tensor mask;
  if (attn_mask.defined()) {
    const bool two_d = attn_mask.dim() == 2 && attn_mask.shape() == Shape{L, S};
    const bool three_d = attn_mask.dim() == 3 && attn_mask.shape() == Shape{N * H, L, S};
    if (!two_d && !three_d)
      refuse(m, kind,
             fmt::format("attn_mask must be [L, S] = [{}, {}] or [N·heads, L, S] = [{}, {}, {}], "
                         "got {}",
                         L, S, N * H, L, S, attn_mask.describe()));
    mask = additive(m, attn_mask, m.dtype(), "attn_mask");
    if (three_d) mask = reshape(mask, {N, H, L, S});
  }
  if (key_padding_mask.defined()) {
    if (key_padding_mask.shape() != Shape{N, S})
      refuse(m, kind,
             fmt::format("key_padding_mask must be [N, S] = [{}, {}], got {}", N, S,
                         key_padding_mask.describe()));
    const Tensor pad =
        reshape(additive(m, key_padding_mask, m.dtype(), "key_padding_mask"), {N, 1, 1, S});
    mask = mask.defined() ? add(mask, pad) : pad;
  }
  return mask;
}
}  // namespace

MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                     const Tensor& value,
                                                     const Tensor& key_padding_mask,
                                                     bool need_weights, const Tensor& attn_mask,
                                                     bool average_attn_weights) const {
  Tensor weights;
  auto body = [&](const Tensor& query, const Tensor& key, const Tensor& value,
                  const Tensor& key_padding_mask, const Tensor& attn_mask) {
    check_mha_inputs(*this, query, key, value);
    // [N, L, E] views
    const Tensor q_in = batch_first ? query : transpose(query, 0, 1);
    const Tensor k_in = batch_first ? key : transpose(key, 0, 1);
    const Tensor v_in = batch_first ? value : transpose(value, 0, 1);
    const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1), E = embed_dim;
    if (k_in.size(0) != N || v_in.size(0) != N || v_in.size(1) != S)
      refuse(*this, "MultiheadAttention",
             fmt::format("query, key and value must share the batch size and key and value the "
                         "length, got query {}, key {}, value {}",
                         query.describe(), key.describe(), value.describe()));
    const Tensor mask = mha_mask(*this, attn_mask, key_padding_mask, N, L, S);
    const bool drop = is_training() && dropout > 0.0;
    // Self-attention with the packed in-projection: one GEMM for q, k and v, the heads read and
    // merged in place (a traced export keeps the composition below).
    if (in_proj_weight.defined() && query.same(key) && key.same(value) && !need_weights && !drop &&
        !tracing()) {
      const Tensor qkv = linear(q_in, in_proj_weight, in_proj_bias);  // [N, L, 3·E]
      const Tensor out = (*out_proj)(packed_self_attention(qkv, num_heads, mask));
      return batch_first ? out : transpose(out, 0, 1);
    }
    const Tensor q = mha_project(*this, q_in, 0), k = mha_project(*this, k_in, 1),
                 v = mha_project(*this, v_in, 2);
    Tensor o;  // [N, H, L, hd]
    if (need_weights || drop) {
      Tensor p = attention_weights(q, k, mask);  // [N, H, L, S]
      if (drop) p = dg::dropout(p, dropout, true, default_generator());
      o = matmul(p, v);
      if (need_weights) weights = average_attn_weights ? mean(p, {1}) : p;
    } else {
      o = scaled_dot_product_attention(q, k, v, mask);
    }
    const Tensor merged = reshape(permute(o, {0, 2, 1, 3}), {N, L, E});
    const Tensor out = (*out_proj)(merged);
    return batch_first ? out : transpose(out, 0, 1);
  };
  // torch's unbatched inputs (query, key, value all 2-D): a batch of one at the batch axis
  auto batched = [&](const Tensor& query, const Tensor& key, const Tensor& value,
                     const Tensor& key_padding_mask, const Tensor& attn_mask) {
    const bool unbatched = query.defined() && key.defined() && value.defined() &&
                           query.dim() == 2 && key.dim() == 2 && value.dim() == 2;
    if (!unbatched) return body(query, key, value, key_padding_mask, attn_mask);
    const int64_t axis = batch_first ? 0 : 1;
    const Tensor padding =
        key_padding_mask.defined() ? unsqueeze(key_padding_mask, 0) : key_padding_mask;
    const Tensor y = body(unsqueeze(query, axis), unsqueeze(key, axis), unsqueeze(value, axis),
                          padding, attn_mask);
    if (weights.defined()) weights = squeeze(weights, 0);
    return squeeze(y, axis);
  };
  Tensor output = hooked(batched, query, key, value, key_padding_mask, attn_mask);
  return {output, weights};
}

TransformerEncoderLayer::TransformerEncoderLayer(const Options& o, DType dtype)
    : Module(dtype), options(o) {
  if (o.dim_feedforward <= 0)
    refuse(*this, "TransformerEncoderLayer",
           fmt::format("dim_feedforward must be positive, got {}", o.dim_feedforward));
  self_attn = &register_module("self_attn", std::make_unique<MultiheadAttention>(
                                                o.d_model, o.nhead, o.dropout, true, o.batch_first,
                                                std::nullopt, std::nullopt, dtype));
  linear1 = &register_module("linear1",
                             std::make_unique<Linear>(o.d_model, o.dim_feedforward, true, dtype));
  dropout = &register_module("dropout", std::make_unique<Dropout>(o.dropout));
  linear2 = &register_module("linear2",
                             std::make_unique<Linear>(o.dim_feedforward, o.d_model, true, dtype));
  norm1 =
      &register_module("norm1", std::make_unique<LayerNorm>(o.d_model, o.layer_norm_eps, dtype));
  norm2 =
      &register_module("norm2", std::make_unique<LayerNorm>(o.d_model, o.layer_norm_eps, dtype));
  dropout1 = &register_module("dropout1", std::make_unique<Dropout>(o.dropout));
  dropout2 = &register_module("dropout2", std::make_unique<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& src_key_padding_mask) const {
  auto body = [&](const Tensor& src, const Tensor& src_mask, const Tensor& padding) {
    auto sa = [&](const Tensor& x) {
      return (*dropout1)((*self_attn)(x, x, x, padding, false, src_mask).output);
    };
    auto hidden = [&](const Tensor& x) {  // dropout(activation(linear1(x)))
      const bool rectify = options.activation == Options::Activation::relu;
      if (rectify && linear1->plain() &&
          !tracing())  // one op, the GEMM's output rectified in place
        return (*dropout)(linear_relu(x, linear1->weight, linear1->bias));
      const Tensor h = (*linear1)(x);
      return (*dropout)(rectify ? relu(h) : gelu(h));
    };
    // residual + dropout2(linear2(hidden(x))); one linear_add (the residual pre-fills the GEMM's
    // output) when dropout2 and linear2 compute nothing else (a traced export keeps the add)
    auto add_ff = [&](const Tensor& residual, const Tensor& x) {
      const bool drops = dropout2->p > 0 && dropout2->is_training();
      if (!drops && !dropout2->has_forward_hooks() && linear2->plain() && !tracing())
        return linear_add(residual, hidden(x), linear2->weight, linear2->bias);
      return add(residual, (*dropout2)((*linear2)(hidden(x))));
    };
    if (options.norm_first) {
      const Tensor x = add(src, sa((*norm1)(src)));
      return add_ff(x, (*norm2)(x));
    }
    const Tensor x = (*norm1)(add(src, sa(src)));
    return (*norm2)(add_ff(x, x));
  };
  return hooked(body, src, src_mask, src_key_padding_mask);
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerOptions& layer,
                                       int64_t num_layers, bool final_norm, DType dtype)
    : Module(dtype), norm(nullptr) {
  if (num_layers < 1)
    refuse(*this, "TransformerEncoder", fmt::format("num_layers must be >= 1, got {}", num_layers));
  layers = &register_module("layers", std::make_unique<ModuleList>(dtype));
  for (int64_t i = 0; i < num_layers; ++i) {
    auto& l = layers->emplace<TransformerEncoderLayer>(layer, dtype);
    if (i == 0) continue;  // torch deep-copies one layer: every layer starts with its values
    const auto from = layers->at<TransformerEncoderLayer>(0).named_parameters();
    auto to = l.named_parameters();
    for (size_t p = 0; p < to.size(); ++p) to[p].second.copy_from(from[p].second);
  }
  if (final_norm)
    norm = &register_module(
        "norm", std::make_unique<LayerNorm>(layer.d_model, layer.layer_norm_eps, dtype));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask,
                                   const Tensor& src_key_padding_mask) const {
  auto body = [&](const Tensor& src, const Tensor& mask, const Tensor& padding) {
    Tensor x = src;
    for (Module* m : *layers) x = (*static_cast<TransformerEncoderLayer*>(m))(x, mask, padding);
    return norm ? (*norm)(x) : x;
  };
  return hooked(body, src, mask, src_key_padding_mask);
}

}  // namespace dg
