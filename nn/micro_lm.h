// MicroLM: the decoder-only language model of the reproduction, with five residual modes.
//
//  standard            pre-norm LLaMA block: x = c + Attn(N(c)); y = x + FFN(N(x)).
//  block_attnres       the reference's AttnRes block (upstream-protocol.md §2.3): sources
//                      S_0 = embedding, S_{l+1} = output of block l. Block l routes per token
//                      α = softmax(RMSNorm(c; g_route)·W_routeᵀ) over its l+1 sources and feeds
//                      attention with h = Σ α_j S_j; one route serves Q, K and V. The residual
//                      stream stays standard: x = c + Attn(N(h), N(h)); y = x + FFN(N(x)).
//  rd_attnres          the same, with a second route for V: Attn(N(h_qk), N(h_v)).
//  paper_block_attnres the paper formulation of Attention Residuals: every sublayer (attention and
//                      feed-forward) reads a softmax mixture of the sources instead of the residual
//                      stream. Sources: the embedding, each completed block's sum, and the current
//                      block's partial sum. A block is `attnres_block_size` sublayers (two per
//                      layer); block size 1 makes every sublayer output its own source, which is
//                      Full AttnRes. Sublayer s has a pseudo-query w_s ∈ R^d (zero at init, so
//                      mixing starts uniform); logits are w_s · RMSNorm(S_j) (RMSNorm without a
//                      gain) and the raw sources are mixed: h = Σ_j α_j S_j. The sublayer reads
//                      N(h) and its output is added to the current partial sum. The model's
//                      output reads a final mixture of all sources with its own pseudo-query.
//  paper_rd_attnres    the same, with a second pseudo-query for the attention sublayer's V input.
//
// Parameter names follow the reference (§2.4): token.weight, blocks.0.route_norm.weight,
// blocks.0.qk_route.weight, ..., final_norm.weight. The head is tied to token.weight unless
// the config says otherwise. The model does not own data, optimisers or checkpoints.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "tensor/rng.h"

namespace dg {

enum class ResidualMode {
  standard,
  block_attnres,
  rd_attnres,
  paper_block_attnres,
  paper_rd_attnres
};
const char* residual_mode_name(ResidualMode mode);
ResidualMode parse_residual_mode(const std::string& text);  // throws listing the valid names
bool is_reference_attnres(ResidualMode mode);               // block_attnres or rd_attnres
bool is_paper_attnres(ResidualMode mode);
bool has_v_route(ResidualMode mode);  // rd_attnres or paper_rd_attnres

struct MicroLMConfig {
  int64_t vocab = 512;
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t seq_len = 64;
  int64_t expansion = 3;  // feed-forward width = expansion · dim
  ResidualMode mode = ResidualMode::rd_attnres;
  Norm::Kind norm = Norm::Kind::rms;
  double norm_eps = 1e-6;
  FeedForward::Kind ffn = FeedForward::Kind::swiglu;
  bool rope = true;
  bool bias = false;
  bool learned_positions = false;
  bool tied_head = true;
  int64_t attnres_block_size = 2;  // paper modes: sublayers per block (1 = Full AttnRes)
  // Throws a one-line error naming the first inconsistent field.
  void validate() const;
  std::string describe() const;
  // The number of parameters MicroLM(*this).parameter_count() reports, computed from the sizes
  // without building the model (for help texts and reports; tests check the two agree).
  int64_t parameter_count() const;
};

// One transformer layer in any of the modes.
class MicroBlock : public Module {
 public:
  MicroBlock(const MicroLMConfig& config, int64_t index, DType dtype);
  // Reference modes: c = S_l (latest source), sources = S_0..S_l. Standard: sources = {c}.
  Tensor forward(const std::vector<Tensor>& sources);
  // The routes of the last forward (reference modes), [B, T, k]; undefined otherwise.
  Tensor last_alpha_qk, last_alpha_v;

  const MicroLMConfig& config;
  int64_t index;
  Norm* route_norm = nullptr;
  Linear* qk_route = nullptr;
  Linear* v_route = nullptr;  // equals qk_route for block_attnres
  Norm* attention_norm = nullptr;
  CausalSelfAttention* attention = nullptr;
  Norm* ffn_norm = nullptr;
  FeedForward* ffn = nullptr;
  // paper modes: pseudo-queries [1, D]
  Tensor attn_query, attn_v_query, ffn_query;
};

struct RouteStats {
  // Per layer: mean over tokens of α_qk and α_v, [k] each, and the QK/V JS divergence.
  std::vector<std::vector<double>> mean_alpha_qk, mean_alpha_v;
  std::vector<double> js_per_layer;
  std::vector<std::vector<double>> js_per_token;  // per layer, per (b, t)
  double js_reference = 0;  // the reference's value: plain mean over all layers (incl. layer 0)
};

class MicroLM : public Module {
 public:
  explicit MicroLM(const MicroLMConfig& config, DType dtype = DType::f32);
  // ids int32 [B, T] -> logits [B, T, vocab]
  Tensor forward(const Tensor& ids);
  // ids int32 [B, T] -> the final norm's output [B, T, dim], which the head reads.
  Tensor features(const Tensor& ids);
  // Mean cross-entropy of next-token prediction from ids [B, T] and targets [B, T], through
  // linear_cross_entropy: the same value as cross_entropy(forward(ids)) up to float rounding,
  // without the [B·T, vocab] logits (and their gradient) in memory.
  Tensor loss(const Tensor& ids, const Tensor& targets);
  // head.weight, or token.weight when the head is tied: [vocab, dim].
  const Tensor& head_weight() const;

  // The reference's initialisation: consumes torch's mt19937 stream in the reference's order
  // (construction draws, then apply() draws; §2.5, Appendix C). Reference modes and standard.
  void init_torch_parity(uint64_t seed);
  // depthgrad's cleaner init: every tensor from a stream keyed by its name (N(0, 0.02) for
  // matrices, ones for norm gains, zeros for biases and pseudo-queries); v_route starts as a copy
  // of qk_route, so rd_attnres starts as the same function as block_attnres.
  void init_identical(uint64_t seed);

  // Routing diagnostics of the last forward (reference and paper modes).
  RouteStats route_stats() const;

  const MicroLMConfig& config() const { return config_; }
  std::vector<MicroBlock*> blocks;
  Embedding* token = nullptr;
  Embedding* position = nullptr;
  Norm* final_norm = nullptr;
  Linear* head = nullptr;  // untied head only
  Tensor final_query;      // paper modes: [1, D]

 private:
  Tensor forward_paper(const Tensor& h0);
  MicroLMConfig config_;
  Tensor unit_gain_;  // ones [D], the gain-free RMSNorm of the paper modes' keys
  // paper modes: routes of the last forward, per sublayer (attention QK, attention V, FFN).
  std::vector<Tensor> paper_alpha_qk_, paper_alpha_v_;
};

}  // namespace dg
