// MicroLM forward passes, initialisations and routing diagnostics (see micro_lm.h).
#include "nn/lm/micro_lm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "nn/init.h"

namespace dg {

// ---- config

void MicroLMConfig::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("model config: " + what); };
  if (vocab < 1 || vocab > 2147483647)  // the tokenizer and the decoder keep int32 ids
    fail(fmt::format("vocab must be in [1, 2147483647], got {}", vocab));
  if (dim < 1) fail(fmt::format("dim must be >= 1, got {}", dim));
  if (layers < 1) fail(fmt::format("layers must be >= 1, got {}", layers));
  if (heads < 1 || dim % heads != 0) fail(fmt::format("heads {} must divide dim {}", heads, dim));
  if (kv_heads < 1 || heads % kv_heads != 0)
    fail(fmt::format("kv_heads {} must divide heads {}", kv_heads, heads));
  if (rope && (dim / heads) % 2 != 0)
    fail(fmt::format("rope needs an even head dimension dim / heads, got {} / {} = {}", dim, heads,
                     dim / heads));
  if (!(norm_eps > 0) || !std::isfinite(norm_eps))
    fail(fmt::format("norm_eps must be finite and > 0, got {}", norm_eps));
  if (seq_len < 1) fail(fmt::format("seq_len must be >= 1, got {}", seq_len));
  if (expansion < 1) fail(fmt::format("expansion must be >= 1, got {}", expansion));
  if (ffn_hidden < 0) fail(fmt::format("ffn_hidden must be >= 0, got {}", ffn_hidden));
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    fail(fmt::format("rope_theta must be finite and > 0, got {}", rope_theta));
  if (attnres_block_size < 1)
    fail(fmt::format("attnres_block_size must be >= 1, got {}", attnres_block_size));
}

std::string MicroLMConfig::describe() const {
  return fmt::format(
      "{} vocab={} d={} layers={} heads={} kv_heads={} seq={} ffn={}{} {} {}{}",
      residual_mode_name(mode), vocab, dim, layers, heads, kv_heads, seq_len,
      ffn_hidden > 0 ? std::to_string(ffn_hidden) + " " : std::to_string(expansion) + "x",
      ffn == FeedForward::Kind::swiglu ? "swiglu"
      : ffn == FeedForward::Kind::gelu ? "gelu"
                                       : "gelu_tanh",
      norm == Norm::Kind::rms ? "rmsnorm" : "layernorm",
      rope ? rope_theta == 10000.0 ? " rope" : fmt::format(" rope(theta={})", rope_theta) : "",
      is_paper_attnres(mode) ? fmt::format(" block_size={}", attnres_block_size) : "");
}

// The shared layers here, the mode's own parameters from the mode.
double micro_lm_parameter_count(const MicroLMConfig& c) {
  const double dim = static_cast<double>(c.dim), vocab = static_cast<double>(c.vocab);
  const double kv_dim = dim / static_cast<double>(c.heads) * static_cast<double>(c.kv_heads);
  const double hidden = static_cast<double>(c.ffn_width());
  const double norm = c.norm == Norm::Kind::layer ? 2 * dim : dim;  // gain (+ bias)
  const double linear_bias = c.bias ? 1 : 0;
  auto linear = [&](double in, double out) { return in * out + linear_bias * out; };
  double per_layer = 2 * norm;                                  // attention_norm, ffn_norm
  per_layer += linear(dim, dim) * 2 + linear(dim, kv_dim) * 2;  // q, output; k, v
  per_layer +=                                                  // up (and gate), down
      linear(dim, hidden) * (c.ffn == FeedForward::Kind::swiglu ? 2 : 1) + linear(hidden, dim);
  double total = vocab * dim + norm;  // token embedding, final_norm
  if (c.learned_positions) total += static_cast<double>(c.seq_len) * dim;
  if (!c.tied_head) total += vocab * dim;
  const Residual& mode = c.mode.behaviour();
  total += mode.model_parameter_count(c);
  for (int64_t l = 0; l < c.layers; ++l) total += per_layer + mode.block_parameter_count(c, l);
  return total;
}

int64_t MicroLMConfig::parameter_count() const {
  return static_cast<int64_t>(micro_lm_parameter_count(*this));
}

// ---- block

MicroBlock::MicroBlock(const MicroLMConfig& c, int64_t index_, DType dtype)
    : Module(dtype), config(c), index(index_) {
  c.mode.behaviour().add_block_parameters(*this);  // first: the checkpoints' order
  auto norm = [&](const char* name) {
    return &register_module(name, std::make_unique<Norm>(c.norm, c.dim, c.norm_eps, dtype));
  };
  attention_norm = norm("attention_norm");
  AttentionConfig ac{c.dim, c.heads, c.kv_heads, c.rope, c.rope_theta, c.bias};
  attention = &register_module("attention", std::make_unique<CausalSelfAttention>(ac, dtype));
  ffn_norm = norm("ffn_norm");
  ffn = &register_module("ffn",
                         std::make_unique<FeedForward>(c.ffn, c.dim, c.ffn_width(), c.bias, dtype));
}

// sources: S_0..S_l, each [B, T, D] -> S_{l+1} [B, T, D]
Tensor MicroBlock::forward(const std::vector<Tensor>& sources) {
  return hooked_list(
      [&](const std::vector<Tensor>& sources) {
        return config.mode.behaviour().block_forward(*this, sources);
      },
      sources);
}

// ---- model

MicroLM::MicroLM(const MicroLMConfig& config, DType dtype) : Module(dtype), config_(config) {
  config_.validate();
  init::SkipGuard skip;  // layers draw nothing: an init routine below sets every parameter
  const MicroLMConfig& c = config_;
  token = &register_module("token", std::make_unique<Embedding>(c.vocab, c.dim, dtype));
  if (c.learned_positions)
    position = &register_module("position", std::make_unique<Embedding>(c.seq_len, c.dim, dtype));
  // Blocks are registered through a holder module so names read "blocks.<i>.…".
  struct Holder : Module {
    using Module::Module;
    using Module::register_module;
  };
  auto holder = std::make_unique<Holder>(dtype);
  for (int64_t l = 0; l < c.layers; ++l)
    blocks.push_back(&holder->register_module(std::to_string(l),
                                              std::make_unique<MicroBlock>(config_, l, dtype)));
  register_module("blocks", std::move(holder));
  c.mode.behaviour().add_model_parameters(*this);
  final_norm =
      &register_module("final_norm", std::make_unique<Norm>(c.norm, c.dim, c.norm_eps, dtype));
  if (!c.tied_head)
    head = &register_module("head", std::make_unique<Linear>(c.dim, c.vocab, false, dtype));
}

// ids int64 or int32 [B, T] -> final-norm output [B, T, D]
Tensor MicroLM::features(const Tensor& ids) {
  const CreationScope scope = creation_scope();
  if (!(ids.dtype() == DType::i64 || ids.dtype() == DType::i32) || ids.dim() != 2)
    throw std::invalid_argument(
        fmt::format("MicroLM: expected int64 or int32 token ids [B, T], got {}", ids.describe()));
  const int64_t T = ids.size(1);
  if (T > config_.seq_len && config_.learned_positions)
    throw std::invalid_argument(
        fmt::format("MicroLM: sequence of {} tokens exceeds seq_len {}", T, config_.seq_len));
  Tensor h = (*token)(ids);  // [B, T, D]
  if (position) {
    std::vector<int64_t> pos(T);
    std::iota(pos.begin(), pos.end(), int64_t(0));
    h = add(h, (*position)(Tensor::from_ids(pos, {1, T})));
  }
  return final_norm->forward(config_.mode.behaviour().forward(*this, h));
}

const Tensor& MicroLM::head_weight() const { return head ? head->weight : token->weight; }

// ids int64 or int32 [B, T] -> logits [B, T, V]. An untied head runs its own forward (its hooks
// fire); the tied one is the token embedding's weight.
Tensor MicroLM::forward(const Tensor& ids) {
  return hooked(
      [&](const Tensor& ids) {
        const Tensor h = features(ids);
        return head ? (*head)(h) : linear(h, token->weight);
      },
      ids);
}

// The head and the cross-entropy in one op: the [B·T, V] logits are never held (unless an
// untied head has forward hooks: it then runs its forward, and cross_entropy reads its logits).
// loss() is not the forward: the model's own forward hooks do not run.
Tensor MicroLM::loss(const Tensor& ids, const Tensor& targets) {
  const CreationScope scope = creation_scope();
  Tensor h = features(ids);  // [B, T, D]
  const int64_t rows = h.size(0) * h.size(1);
  const Tensor flat = reshape(h, {rows, config_.dim});
  if (head && !head->plain())
    return cross_entropy((*head)(flat), raw::view_reshape(targets, {rows}));
  return linear_cross_entropy(flat, head_weight(), raw::view_reshape(targets, {rows}));
}

// ---- initialisation

namespace {
void normal_into(TorchGenerator& gen, const Tensor& t, double mean, double std) {
  dispatch_float(t.dtype(), "init",
                 [&]<class T>() { gen.normal_(t.mutable_data<T>(), t.numel(), mean, std); });
}
// Draws that torch consumes at construction and that init later overwrites.
void consume_kaiming(TorchGenerator& gen, const Linear& l) {
  std::vector<float> scratch(l.weight.numel());
  gen.kaiming_uniform_linear_(scratch.data(), l.out_features, l.in_features);
  if (l.bias.defined()) {
    std::vector<float> b(l.out_features);
    double bound = 1.0 / std::sqrt(static_cast<double>(l.in_features));
    gen.uniform_(b.data(), l.out_features, -bound, bound);
  }
}
void consume_normal(TorchGenerator& gen, int64_t n) {
  std::vector<float> scratch(n);
  gen.normal_(scratch.data(), n, 0.0, 1.0);
}
// The Linear layers of a block in the reference's registration (and init) order.
std::vector<Linear*> block_linears(MicroBlock& b) {
  std::vector<Linear*> out;
  if (b.qk_route) out.push_back(b.qk_route);
  if (b.v_route && b.v_route != b.qk_route) out.push_back(b.v_route);
  out.insert(out.end(),
             {b.attention->q, b.attention->k, b.attention->v, b.attention->output, b.ffn->up});
  if (b.ffn->gate) out.push_back(b.ffn->gate);
  out.push_back(b.ffn->down);
  return out;
}
}  // namespace

void MicroLM::init_torch_parity(uint64_t seed) {
  NoGradGuard no_grad;
  TorchGenerator gen(seed);
  // 1. construction draws (values overwritten below, but the stream advances)
  consume_normal(gen, token->weight.numel());
  if (position) consume_normal(gen, position->weight.numel());
  for (MicroBlock* b : blocks)
    for (Linear* l : block_linears(*b)) consume_kaiming(gen, *l);
  init::SkipGuard skip;  // a shape only: its own default draws would be wasted
  Linear tied_head_shape(config_.dim, config_.vocab, false, DType::f32);
  consume_kaiming(gen, head ? *head : tied_head_shape);
  // 2. apply() draws: N(0, 0.02) for every Linear and Embedding weight, biases zero
  normal_into(gen, token->weight, 0.0, 0.02);
  if (position) normal_into(gen, position->weight, 0.0, 0.02);
  for (MicroBlock* b : blocks)
    for (Linear* l : block_linears(*b)) {
      normal_into(gen, l->weight, 0.0, 0.02);
      if (l->bias.defined()) l->bias.fill(0.0);
    }
  // The tied head's draw lands in token.weight (it is the same tensor).
  normal_into(gen, head ? head->weight : token->weight, 0.0, 0.02);
}

void MicroLM::init_identical(uint64_t seed) {
  NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters()) {
    const bool is_matrix = p.dim() == 2 && name.find("_query") == std::string::npos;
    if (is_matrix) {
      TorchGenerator gen(name_seed(seed, name));
      normal_into(gen, p, 0.0, 0.02);
    } else if (name.ends_with(".bias") || name.find("_query") != std::string::npos) {
      p.fill(0.0);
    } else {
      p.fill(1.0);  // norm gains
    }
  }
  config_.mode.behaviour().after_init_identical(*this);
}

// ---- diagnostics

std::vector<double> route_js_per_token(const Tensor& p_in, const Tensor& q_in) {
  if (p_in.shape() != q_in.shape())
    throw std::invalid_argument(
        fmt::format("route JS: {} and {} differ in shape", p_in.describe(), q_in.describe()));
  const int64_t J = p_in.size(-1), tokens = p_in.numel() / J;
  std::vector<double> p = p_in.to_vector(), q = q_in.to_vector(), out(tokens);
  const double eps = 1e-8;
  for (int64_t t = 0; t < tokens; ++t) {
    double acc = 0;
    for (int64_t j = 0; j < J; ++j) {
      double a = p[t * J + j], b = q[t * J + j], m = 0.5 * (a + b);
      acc += a * std::log((a + eps) / (m + eps)) + b * std::log((b + eps) / (m + eps));
    }
    out[t] = 0.5 * acc;
  }
  return out;
}

RouteStats MicroLM::route_stats() const {
  RouteStats stats;
  auto mean_over_tokens = [](const Tensor& a) {
    const int64_t J = a.size(-1), tokens = a.numel() / J;
    std::vector<double> v = a.to_vector(), m(J, 0.0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < J; ++j) m[j] += v[t * J + j];
    for (double& x : m) x /= static_cast<double>(tokens);
    return m;
  };
  for (const MicroBlock* b : blocks) {
    if (!b->last_alpha_qk.defined()) continue;
    stats.mean_alpha_qk.push_back(mean_over_tokens(b->last_alpha_qk));
    stats.mean_alpha_v.push_back(mean_over_tokens(b->last_alpha_v));
    std::vector<double> js = route_js_per_token(b->last_alpha_qk, b->last_alpha_v);
    double mean = js.empty()
                      ? 0.0
                      : std::accumulate(js.begin(), js.end(), 0.0) / static_cast<double>(js.size());
    stats.js_per_layer.push_back(mean);
    stats.js_per_token.push_back(std::move(js));
  }
  if (!stats.js_per_layer.empty())
    stats.js_reference =
        std::accumulate(stats.js_per_layer.begin(), stats.js_per_layer.end(), 0.0) /
        static_cast<double>(stats.js_per_layer.size());
  return stats;
}

}  // namespace dg
