// Incremental decoding of a MicroLM: a K/V cache per layer and a forward of only the new
// positions, in every residual mode (standard, the reference AttnRes modes, the paper forms) with
// multi-head or grouped-query attention. Depth routes mix sources per token, so the K/V cache is
// the only state that spans positions; the new positions' sources live in reused buffers.
// Inference only: no autograd, plain kernels (tensor/kernels_*.h) into buffers allocated once.
// It is the MicroLM's CausalLM (nn/lm/causal_lm.h), what generate_tokens runs on. Not here: several
// sequences at once, sampling (train/lm/generate.h), running past seq_len (the caller resets and
// re-reads a window: see generate_tokens).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nn/lm/causal_lm.h"
#include "nn/lm/micro_lm.h"

namespace dg {

class Decoder;

// What a residual mode's decode step (Residual::decode, nn/lm/residual/) works with: n new rows at
// the cache's next positions, source slots and scratch rows of [n, D] in T, and the shared
// sublayers on raw rows, each the plain-kernel twin of the op MicroLM::forward runs.
template <class T>
struct DecodeStep {
  Decoder& decoder;
  const MicroLM& model;
  const MicroLMConfig& config;
  int64_t n;  // new rows
  // Scratch rows [n, D]: free for the mode's use between the calls below.
  T *x, *normed, *mix_qk, *mix_v, *u_qk, *u_v, *sublayer;
  T *route_logits, *alpha;  // [n, decode_slots]
  T *stat_a, *stat_b;       // [n]

  T* source(int64_t j) const;                    // slot j [n, D]; slot 0 holds the embedding
  const T* const* sources(int64_t count) const;  // pointers of slots 0 .. count − 1
  // out [n, D] = Norm(x [n, D])
  void norm(T* out, const T* x, const Norm& norm) const;
  // y [n, out] = x [n, in] · Wᵀ (+ bias) (+ residual [n, out])
  void linear(T* y, const T* x, const Linear& l, const T* residual = nullptr) const;
  // out [n, D] = residual + Attn(Q, K from u_qk; V from u_v) of block `layer`, K/V cached.
  void attention(const MicroBlock& block, int64_t layer, const T* u_qk, const T* u_v, T* out,
                 const T* residual) const;
  // out [n, D] = residual + FFN(x)
  void feed_forward(const FeedForward& ffn, const T* x, T* out, const T* residual) const;
  // The paper modes' mix of slots 0 .. count − 1 with a pseudo-query [1, D]: out [n, D].
  void pseudo_query_mix(int64_t count, const Tensor& query, T* out) const;
};

// Reads the model's weights in place (no copy): the model must outlive the decoder (or be shared
// with it) and its parameters must not move (a Trainer's flat buffers do not). Weight values may
// change between calls (training), but positions already in the cache keep the K/V of the old
// weights.
class Decoder : public CausalLM {
 public:
  explicit Decoder(const MicroLM& model);
  explicit Decoder(const MicroLM&&) = delete;  // a temporary model would not outlive the decoder
  // Keeps the model alive as long as the decoder: for a caller that hands the decoder on as a
  // CausalLM and lets the model go (depthgrad generate). Throws when model is null.
  explicit Decoder(std::shared_ptr<const MicroLM> model);

  const MicroLMConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab; }
  int64_t context_length() const override { return config_.seq_len; }  // the cache's positions
  int64_t cached_length() const override { return length_; }           // positions in it now
  void reset() override { length_ = 0; }  // forget them (buffers are kept)

  // Runs ids at positions cached_length() .. cached_length() + n − 1 and adds them to the cache.
  // Returns the logits of the last new position [vocab], or of every new position [n, vocab]
  // when all_positions: equal (to float rounding) to MicroLM::forward on the whole sequence at
  // those positions. The tensor is a view of a buffer the next call overwrites. Throws naming
  // the problem when ids is empty, an id is outside [0, vocab) or the context would overflow.
  // (forward_tokens, the CausalLM call, is append of the last position.)
  const Tensor& append(std::span<const int32_t> ids, bool all_positions = false);

 protected:
  const Tensor& forward_new(std::span<const int32_t> ids) override { return append(ids); }

 private:
  template <class T>
  friend struct DecodeStep;
  template <class T>
  void run(const int32_t* ids, int64_t n, bool all_positions);
  template <class T>
  void attention_sublayer(const MicroBlock& block, int64_t layer, const T* u_qk, const T* u_v,
                          int64_t n, T* out, const T* residual);
  template <class T>
  void attend(int64_t layer, const T* q, int64_t n, T* out);
  void attend_from_start(int64_t layer, int64_t n);
  template <class T>
  void feed_forward(const FeedForward& ffn, const T* x, int64_t n, T* out, const T* residual);
  template <class T>
  void pseudo_query_mix(int64_t sources, const Tensor& query, int64_t n, T* out);
  void ensure_rows(int64_t n);

  std::shared_ptr<const MicroLM> owned_;  // set by the sharing constructor only
  const MicroLM& model_;
  MicroLMConfig config_;
  DType dtype_;
  int64_t head_dim_, kv_dim_, hidden_;
  int64_t length_ = 0;
  int64_t rows_ = 0;                       // new positions the work buffers hold
  std::vector<Tensor> k_cache_, v_cache_;  // per layer [seq_len, kv_heads·hd], rows = positions
  Tensor rope_cos_, rope_sin_;             // [seq_len, hd/2]
  Tensor unit_gain_;                       // ones [D]: the paper modes' gain-free RMSNorm
  // Work buffers, [rows_, ·]: sources (S_j in the AttnRes modes, the residual stream otherwise),
  // attention/FFN inputs, route logits and weights, the FFN's hidden layer, per-row statistics.
  std::vector<Tensor> sources_;
  Tensor x_, normed_, mix_qk_, mix_v_, u_qk_, u_v_, q_, merged_, sublayer_;
  Tensor route_logits_, alpha_, gate_, up_, lse_, stat_a_, stat_b_, logits_;
  Tensor scratch_;  // per thread: attention scores [seq_len] and an output row [hd], in double
  int scratch_threads_ = 0;
  Tensor result_;  // the view append returns
};

}  // namespace dg
