// MicroLM: the decoder-only language model of the reproduction. A block is the shared layers
// (attention_norm, attention, ffn_norm, ffn) plus its residual mode's own parameters; how blocks
// feed one another is the mode's (nn/lm/residual/: standard, block_attnres, rd_attnres and the
// paper forms; residual.h has the registry).
//
// Parameter names follow the reference (tools/attnres/PROTOCOL.md §2.4): token.weight,
// blocks.0.route_norm.weight, blocks.0.qk_route.weight, ..., final_norm.weight. The head is tied
// to token.weight unless the config says otherwise. The model does not own data, optimisers or
// checkpoints, and it names no residual mode: it asks the registry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/lm/residual/residual.h"
#include "tensor/rng.h"

namespace dg {

struct MicroLMConfig {
  int64_t vocab = 512;
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t seq_len = 64;
  int64_t expansion = 3;   // feed-forward width = expansion · dim, unless ffn_hidden is set
  int64_t ffn_hidden = 0;  // > 0: the feed-forward width itself (imported models: any width)
  ResidualMode mode = residual_mode("rd_attnres");
  Norm::Kind norm = Norm::Kind::rms;
  double norm_eps = 1e-6;
  FeedForward::Kind ffn = FeedForward::Kind::swiglu;
  bool rope = true;
  double rope_theta = 10000.0;  // RoPE base: inv_freq_i = 1 / rope_theta^(2i / head_dim)
  bool bias = false;
  bool learned_positions = false;
  bool tied_head = true;
  int64_t attnres_block_size = 2;  // paper modes: sublayers per block (1 = Full AttnRes)
  // The feed-forward's hidden width: ffn_hidden when set, else expansion · dim.
  int64_t ffn_width() const { return ffn_hidden > 0 ? ffn_hidden : expansion * dim; }
  // Throws a one-line error naming the first inconsistent field.
  void validate() const;
  std::string describe() const;
  // The number of parameters MicroLM(*this).parameter_count() reports, computed from the sizes
  // without building the model (for help texts and reports; tests check the two agree).
  int64_t parameter_count() const;
};

// The same count in double (exact up to 2^53; absurd sizes do not overflow): the shared layers
// plus the mode's own (Residual::block_parameter_count, model_parameter_count). The one place
// the count is computed; MicroLMConfig::parameter_count and the memory estimate read it.
double micro_lm_parameter_count(const MicroLMConfig& config);

// One transformer layer in any of the modes: the mode's own parameters (registered first, by the
// mode), then the shared attention_norm, attention, ffn_norm and ffn.
DG_OTHER_FORWARD_BEGIN
class MicroBlock : public Module {
 public:
  MicroBlock(const MicroLMConfig& config, int64_t index,
             DType dtype);                                     // config is kept by reference
  MicroBlock(const MicroLMConfig&&, int64_t, DType) = delete;  // so it must outlive the block
  // Reference modes: c = S_l (latest source), sources = S_0..S_l. Standard: sources = {c}.
  // The paper modes refuse (their blocks read the model's partial sums).
  Tensor forward(const std::vector<Tensor>& sources);
  Tensor operator()(const std::vector<Tensor>& sources) { return forward(sources); }
  // Residual modes register their parameters on the block (nn/lm/residual/).
  using Module::register_module;
  using Module::register_parameter;
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
  // The handles above are the built-in modes' parameters (null or undefined in the other modes);
  // a new mode may register its own and find them by name with parameter("...").
};
DG_OTHER_FORWARD_END

// The standard mode's block (nn/lm/residual/standard.cpp), the pre-norm LLaMA block:
// x = c + Attn(N(c), N(c)); y = x + FFN(N(x)), with N the block's attention_norm and ffn_norm.
// c [B, T, D] -> y [B, T, D].
Tensor pre_norm_block(MicroBlock& block, const Tensor& c);

// The reference AttnRes route (nn/lm/residual/reference_attnres.cpp): per token, the weights over
// depth α = softmax(route(z)) [B, T, J] (route: Linear D -> J, z = the block's routed state
// RMSNorm(c) [B, T, D]) and the mixture h = Σ_j α_j S_j [B, T, D] of the J sources S_0..S_{J-1}.
// Returns h and writes α into alpha. block_attnres calls it once per block, rd_attnres twice (one
// route for Q and K, one for V).
Tensor attnres_route(const Linear& route, const Tensor& z, const std::vector<Tensor>& sources,
                     Tensor& alpha);

// The paper AttnRes mixture (nn/lm/residual/paper_attnres.cpp): per token, the weights over
// depth α = softmax_j(w · RMSNorm(S_j)) [B, T, J] of a pseudo-query w [1, D] against the
// gain-free RMSNorm (unit_gain: ones [D], eps) of each source S_j [B, T, D], and the mixture of
// the raw sources h = Σ_j α_j S_j [B, T, D]. Returns h and writes α into alpha_out. Every
// sublayer of the paper modes, and the model's output, reads one.
Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                        const Tensor& unit_gain, double eps, Tensor& alpha_out);

// Jensen–Shannon divergence (nats) between two routing distributions p, q [.., J], per token,
// exactly as the reference: ½Σ p ln((p+ε)/(m+ε)) + q ln((q+ε)/(m+ε)), m = (p+q)/2, ε = 1e-8.
std::vector<double> route_js_per_token(const Tensor& p, const Tensor& q);

struct RouteStats {
  // Per layer: mean over tokens of α_qk and α_v, [k] each, and the QK/V JS divergence.
  std::vector<std::vector<double>> mean_alpha_qk, mean_alpha_v;
  std::vector<double> js_per_layer;
  std::vector<std::vector<double>> js_per_token;  // per layer, per (b, t)
  double js_reference = 0;  // the reference's value: plain mean over all layers (incl. layer 0)
};

class MicroLM : public Module {
 public:
  // Its layers are built under init::SkipGuard: parameters start at zeros (norm gains at one)
  // and nothing is drawn from any generator until init_torch_parity or init_identical.
  explicit MicroLM(const MicroLMConfig& config, DType dtype = DType::f32);
  // ids int64 or int32 [B, T] -> logits [B, T, vocab]
  Tensor forward(const Tensor& ids) override;
  // ids int64 or int32 [B, T] -> the final norm's output [B, T, dim], which the head reads.
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
  // Residual modes register their model-level parameters here (nn/lm/residual/).
  using Module::register_parameter;
  std::vector<MicroBlock*> blocks;
  Embedding* token = nullptr;
  Embedding* position = nullptr;
  Norm* final_norm = nullptr;
  Linear* head = nullptr;  // untied head only
  Tensor final_query;      // paper modes: [1, D]

 private:
  MicroLMConfig config_;
};

}  // namespace dg
