// MicroLM forward passes, initialisations and routing diagnostics (see micro_lm.h).
#include "nn/micro_lm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dg {

// ---- modes and config

const char* residual_mode_name(ResidualMode mode) {
  switch (mode) {
    case ResidualMode::standard:
      return "standard";
    case ResidualMode::block_attnres:
      return "block_attnres";
    case ResidualMode::rd_attnres:
      return "rd_attnres";
    case ResidualMode::paper_block_attnres:
      return "paper_block_attnres";
    case ResidualMode::paper_rd_attnres:
      return "paper_rd_attnres";
  }
  return "?";
}

ResidualMode parse_residual_mode(const std::string& text) {
  for (ResidualMode m :
       {ResidualMode::standard, ResidualMode::block_attnres, ResidualMode::rd_attnres,
        ResidualMode::paper_block_attnres, ResidualMode::paper_rd_attnres})
    if (text == residual_mode_name(m)) return m;
  throw std::invalid_argument(
      fmt::format("unknown residual mode '{}' (expected standard, block_attnres, rd_attnres, "
                  "paper_block_attnres or paper_rd_attnres)",
                  text));
}

bool is_reference_attnres(ResidualMode m) {
  return m == ResidualMode::block_attnres || m == ResidualMode::rd_attnres;
}
bool is_paper_attnres(ResidualMode m) {
  return m == ResidualMode::paper_block_attnres || m == ResidualMode::paper_rd_attnres;
}
bool has_v_route(ResidualMode m) {
  return m == ResidualMode::rd_attnres || m == ResidualMode::paper_rd_attnres;
}

void MicroLMConfig::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("model config: " + what); };
  if (vocab < 1 || vocab > 2147483647)  // token ids are int32
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
  if (attnres_block_size < 1)
    fail(fmt::format("attnres_block_size must be >= 1, got {}", attnres_block_size));
}

std::string MicroLMConfig::describe() const {
  return fmt::format(
      "{} vocab={} d={} layers={} heads={} kv_heads={} seq={} ffn={}x{} {} {}{}",
      residual_mode_name(mode), vocab, dim, layers, heads, kv_heads, seq_len, expansion,
      ffn == FeedForward::Kind::swiglu ? "swiglu" : "gelu",
      norm == Norm::Kind::rms ? "rmsnorm" : "layernorm", rope ? " rope" : "",
      is_paper_attnres(mode) ? fmt::format(" block_size={}", attnres_block_size) : "");
}

int64_t MicroLMConfig::parameter_count() const {
  const int64_t norm_size = norm == Norm::Kind::layer ? 2 * dim : dim;  // gain (+ bias)
  const int64_t kv_dim = dim / heads * kv_heads;
  const int64_t attention = dim * dim * 2 + dim * kv_dim * 2 + (bias ? 2 * dim + 2 * kv_dim : 0);
  const int64_t hidden = expansion * dim;
  const int64_t projections = ffn == FeedForward::Kind::swiglu ? 3 : 2;  // up, (gate,) down
  const int64_t feed_forward =
      projections * dim * hidden + (bias ? (projections - 1) * hidden + dim : 0);
  int64_t n = vocab * dim + (learned_positions ? seq_len * dim : 0) + norm_size +
              (tied_head ? 0 : vocab * dim);
  for (int64_t l = 0; l < layers; ++l) {
    n += 2 * norm_size + attention + feed_forward;  // attention_norm, ffn_norm
    if (is_reference_attnres(mode))  // route_norm and one or two routers over l + 1 sources
      n += norm_size + (mode == ResidualMode::rd_attnres ? 2 : 1) * dim * (l + 1);
    if (is_paper_attnres(mode))  // pseudo-queries: attention (QK, and V for rd), feed-forward
      n += (mode == ResidualMode::paper_rd_attnres ? 3 : 2) * dim;
  }
  if (is_paper_attnres(mode)) n += dim;  // final_query
  return n;
}

// ---- block

MicroBlock::MicroBlock(const MicroLMConfig& c, int64_t index_, DType dtype)
    : Module(dtype), config(c), index(index_) {
  const int64_t sources = index + 1;  // reference modes: S_0..S_index
  auto norm = [&](const char* name) {
    return &register_module(name, std::make_unique<Norm>(c.norm, c.dim, c.norm_eps, dtype));
  };
  if (is_reference_attnres(c.mode)) {
    route_norm = norm("route_norm");
    qk_route = &register_module("qk_route", std::make_unique<Linear>(c.dim, sources, false, dtype));
    if (c.mode == ResidualMode::rd_attnres) {
      v_route = &register_module("v_route", std::make_unique<Linear>(c.dim, sources, false, dtype));
    } else {
      v_route = qk_route;  // one module, as the reference: counted once
    }
  }
  if (is_paper_attnres(c.mode)) {
    attn_query = register_parameter("attn_query", Tensor::zeros({1, c.dim}, dtype));
    if (c.mode == ResidualMode::paper_rd_attnres)
      attn_v_query = register_parameter("attn_v_query", Tensor::zeros({1, c.dim}, dtype));
    ffn_query = register_parameter("ffn_query", Tensor::zeros({1, c.dim}, dtype));
  }
  attention_norm = norm("attention_norm");
  AttentionConfig ac{c.dim, c.heads, c.kv_heads, c.rope, 10000.0, c.bias};
  attention = &register_module("attention", std::make_unique<CausalSelfAttention>(ac, dtype));
  ffn_norm = norm("ffn_norm");
  ffn = &register_module(
      "ffn", std::make_unique<FeedForward>(c.ffn, c.dim, c.expansion * c.dim, c.bias, dtype));
}

// sources: S_0..S_l, each [B, T, D] -> S_{l+1} [B, T, D]
Tensor MicroBlock::forward(const std::vector<Tensor>& sources) {
  if (is_paper_attnres(config.mode))
    throw std::logic_error(
        fmt::format("block {}: {} blocks are run by MicroLM::forward (they read the model's "
                    "partial-sum sources), not by MicroBlock::forward",
                    index, residual_mode_name(config.mode)));
  const Tensor& c = sources.back();
  Tensor x;
  if (is_reference_attnres(config.mode)) {
    if (static_cast<int64_t>(sources.size()) != index + 1)
      throw std::logic_error(
          fmt::format("block {} expects {} sources, got {}", index, index + 1, sources.size()));
    Tensor z = route_norm->forward(c);
    last_alpha_qk = softmax(qk_route->forward(z), -1);  // [B, T, k]
    Tensor u_qk = attention_norm->forward(depth_mix(sources, last_alpha_qk));
    if (config.mode == ResidualMode::rd_attnres) {
      last_alpha_v = softmax(v_route->forward(z), -1);
      Tensor u_v = attention_norm->forward(depth_mix(sources, last_alpha_v));
      x = attention->forward(u_qk, u_v, c);
    } else {
      last_alpha_v =
          last_alpha_qk;  // the same route computed once; the reference computes it twice
      x = attention->forward(u_qk, u_qk, c);
    }
  } else {
    Tensor u = attention_norm->forward(c);
    x = attention->forward(u, u, c);
  }
  // x = c + Attn(..), y = x + FFN(N(x)): each residual add happens inside the output projection
  return ffn->forward(ffn_norm->forward(x), x);
}

// ---- model

MicroLM::MicroLM(const MicroLMConfig& config, DType dtype) : Module(dtype), config_(config) {
  config_.validate();
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
  if (is_paper_attnres(c.mode))
    final_query = register_parameter("final_query", Tensor::zeros({1, c.dim}, dtype));
  final_norm =
      &register_module("final_norm", std::make_unique<Norm>(c.norm, c.dim, c.norm_eps, dtype));
  if (!c.tied_head)
    head = &register_module("head", std::make_unique<Linear>(c.dim, c.vocab, false, dtype));
  unit_gain_ = Tensor::ones({c.dim}, dtype);
}

namespace {
// Paper modes' mixing: α = softmax_j(w · RMSNorm(S_j)), h = Σ α_j S_j.
// sources S_j [B, T, D], w [1, D] -> h [B, T, D]; alpha_out [B, T, J]
Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                        const Tensor& unit_gain, double eps, Tensor& alpha_out) {
  std::vector<Tensor> logits;
  logits.reserve(sources.size());
  for (const Tensor& s : sources)
    logits.push_back(linear(rms_norm(s, unit_gain, eps), w));  // [B, T, 1]
  alpha_out = softmax(sources.size() == 1 ? logits[0] : concat(logits, -1), -1);
  return depth_mix(sources, alpha_out);
}
}  // namespace

Tensor MicroLM::forward_paper(const Tensor& h0) {
  const MicroLMConfig& c = config_;
  const bool rd = c.mode == ResidualMode::paper_rd_attnres;
  paper_alpha_qk_.clear();
  paper_alpha_v_.clear();
  std::vector<Tensor> sources{h0};
  Tensor partial;  // the current block's partial sum (undefined at a block start)
  int64_t sublayers = 0;
  auto current = [&] {
    std::vector<Tensor> s = sources;
    if (partial.defined()) s.push_back(partial);
    return s;
  };
  auto finish_sublayer = [&](const Tensor& out) {
    partial = partial.defined() ? add(partial, out) : out;
    if (++sublayers % c.attnres_block_size == 0) {
      sources.push_back(partial);
      partial = Tensor();
    }
  };
  for (MicroBlock* block : blocks) {
    Tensor alpha_qk, alpha_v;
    std::vector<Tensor> s = current();
    Tensor u_qk = block->attention_norm->forward(
        pseudo_query_mix(s, block->attn_query, unit_gain_, c.norm_eps, alpha_qk));
    Tensor u_v = u_qk;
    alpha_v = alpha_qk;
    if (rd)
      u_v = block->attention_norm->forward(
          pseudo_query_mix(s, block->attn_v_query, unit_gain_, c.norm_eps, alpha_v));
    paper_alpha_qk_.push_back(alpha_qk);
    paper_alpha_v_.push_back(alpha_v);
    block->last_alpha_qk = alpha_qk;
    block->last_alpha_v = alpha_v;
    finish_sublayer(block->attention->forward(u_qk, u_v));
    Tensor alpha_ffn;
    Tensor u = block->ffn_norm->forward(
        pseudo_query_mix(current(), block->ffn_query, unit_gain_, c.norm_eps, alpha_ffn));
    finish_sublayer(block->ffn->forward(u));
  }
  Tensor alpha_final;
  return pseudo_query_mix(current(), final_query, unit_gain_, c.norm_eps, alpha_final);
}

// ids int32 [B, T] -> final-norm output [B, T, D]
Tensor MicroLM::features(const Tensor& ids) {
  if (ids.dtype() != DType::i32 || ids.dim() != 2)
    throw std::invalid_argument(
        fmt::format("MicroLM: expected int32 token ids [B, T], got {}", ids.describe()));
  const int64_t T = ids.size(1);
  if (T > config_.seq_len && config_.learned_positions)
    throw std::invalid_argument(
        fmt::format("MicroLM: sequence of {} tokens exceeds seq_len {}", T, config_.seq_len));
  Tensor h = token->forward(ids);  // [B, T, D]
  if (position) {
    std::vector<int32_t> pos(T);
    std::iota(pos.begin(), pos.end(), 0);
    h = add(h, position->forward(Tensor::from_ids(pos, {1, T})));
  }
  Tensor out;
  if (is_paper_attnres(config_.mode)) {
    out = forward_paper(h);
  } else {
    std::vector<Tensor> sources{h};
    for (MicroBlock* block : blocks) {
      Tensor next = block->forward(
          is_reference_attnres(config_.mode) ? sources : std::vector<Tensor>{sources.back()});
      if (is_reference_attnres(config_.mode))
        sources.push_back(next);
      else
        sources.back() = next;
    }
    out = sources.back();
  }
  return final_norm->forward(out);
}

const Tensor& MicroLM::head_weight() const { return head ? head->weight : token->weight; }

// ids int32 [B, T] -> logits [B, T, V]
Tensor MicroLM::forward(const Tensor& ids) { return linear(features(ids), head_weight()); }

// The head and the cross-entropy in one op: the [B·T, V] logits are never held.
Tensor MicroLM::loss(const Tensor& ids, const Tensor& targets) {
  Tensor h = features(ids);  // [B, T, D]
  const int64_t rows = h.size(0) * h.size(1);
  return linear_cross_entropy(reshape(h, {rows, config_.dim}), head_weight(),
                              targets.view_reshape({rows}));
}

// ---- initialisation

namespace {
void normal_into(TorchGenerator& gen, const Tensor& t, double mean, double std) {
  dispatch_float(t.dtype(), "init",
                 [&]<class T>() { gen.normal_(t.data<T>(), t.numel(), mean, std); });
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
  for (MicroBlock* b : blocks)
    if (b->v_route && b->v_route != b->qk_route) b->v_route->weight.copy_from(b->qk_route->weight);
}

// ---- diagnostics

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
