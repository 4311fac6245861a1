// The paper formulation of Attention Residuals: paper_block_attnres and paper_rd_attnres, one
// class with a switch for the V pseudo-query. Every sublayer (attention and feed-forward) reads a
// softmax mixture of the sources instead of the residual stream. Not here: the reference's
// router modes (reference_attnres.cpp); blocks cannot run alone (they read the model's sources).
//
// Sources: the embedding, each completed block's sum, and the current block's partial sum. A
// block is `attnres_block_size` sublayers (two per layer); block size 1 makes every sublayer
// output its own source, which is Full AttnRes. Sublayer s has a pseudo-query w_s ∈ R^d (zero at
// init, so mixing starts uniform); logits are w_s · RMSNorm(S_j) (RMSNorm without a gain) and the
// raw sources are mixed: h = Σ_j α_j S_j. The sublayer reads N(h) and its output is added to the
// current partial sum. The model's output reads a final mixture of all sources with its own
// pseudo-query. paper_rd_attnres has a second pseudo-query for the attention sublayer's V input.
//
// Parameters: per block attn_query, (attn_v_query,) ffn_query [1, D], before the shared layers;
// final_query [1, D] after the blocks.
#include <fmt/format.h>

#include <cstring>

#include "nn/lm/decode.h"
#include "nn/lm/micro_lm.h"
#include "tensor/exercise.h"

namespace dg {

// α = softmax_j(w · RMSNorm(S_j)), h = Σ α_j S_j.
// sources S_j [B, T, D], w [1, D] -> h [B, T, D]; alpha_out [B, T, J]
DG_EXERCISE Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                                    const Tensor& unit_gain, double eps, Tensor& alpha_out) {
  std::vector<Tensor> logits;
  logits.reserve(sources.size());
  for (const Tensor& s : sources)
    logits.push_back(linear(rms_norm(s, unit_gain, eps), w));  // [B, T, 1]
  alpha_out = softmax(sources.size() == 1 ? logits[0] : cat(logits, -1), -1);
  return depth_mix(sources, alpha_out);
}

namespace {

class PaperAttnRes final : public Residual {
 public:
  explicit PaperAttnRes(bool v_query) : v_query_(v_query) {}

  void add_block_parameters(MicroBlock& b) const override {
    const int64_t D = b.config.dim;
    b.attn_query = b.register_parameter("attn_query", Tensor::zeros({1, D}, b.dtype()));
    if (v_query_)
      b.attn_v_query = b.register_parameter("attn_v_query", Tensor::zeros({1, D}, b.dtype()));
    b.ffn_query = b.register_parameter("ffn_query", Tensor::zeros({1, D}, b.dtype()));
  }
  void add_model_parameters(MicroLM& model) const override {
    model.final_query = model.register_parameter(
        "final_query", Tensor::zeros({1, model.config().dim}, model.dtype()));
  }
  double block_parameter_count(const MicroLMConfig& c, int64_t) const override {
    return (v_query_ ? 3 : 2) * static_cast<double>(c.dim);  // attention (QK, V), feed-forward
  }
  double model_parameter_count(const MicroLMConfig& c) const override {
    return static_cast<double>(c.dim);  // final_query
  }

  Tensor block_forward(MicroBlock& b, const std::vector<Tensor>&) const override {
    throw std::logic_error(
        fmt::format("block {}: {} blocks are run by MicroLM::forward (they read the model's "
                    "partial-sum sources), not by MicroBlock::forward",
                    b.index, residual_mode_name(b.config.mode)));
  }

  // h0 [B, T, D] -> the final mixture of all sources [B, T, D]
  Tensor forward(MicroLM& model, const Tensor& h0) const override {
    const MicroLMConfig& c = model.config();
    const Tensor unit_gain = Tensor::ones({c.dim}, model.dtype());  // the keys' gain-free RMSNorm
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
    for (MicroBlock* block : model.blocks) {
      Tensor alpha_qk, alpha_v;
      std::vector<Tensor> s = current();
      Tensor u_qk = (*block->attention_norm)(
          pseudo_query_mix(s, block->attn_query, unit_gain, c.norm_eps, alpha_qk));
      Tensor u_v = u_qk;
      alpha_v = alpha_qk;
      if (v_query_)
        u_v = (*block->attention_norm)(
            pseudo_query_mix(s, block->attn_v_query, unit_gain, c.norm_eps, alpha_v));
      block->last_alpha_qk = alpha_qk;
      block->last_alpha_v = alpha_v;
      finish_sublayer((*block->attention)(u_qk, u_v));
      Tensor alpha_ffn;
      Tensor u = (*block->ffn_norm)(
          pseudo_query_mix(current(), block->ffn_query, unit_gain, c.norm_eps, alpha_ffn));
      finish_sublayer((*block->ffn)(u));
    }
    Tensor alpha_final;
    return pseudo_query_mix(current(), model.final_query, unit_gain, c.norm_eps, alpha_final);
  }

  // Every sublayer's output may become a source: the embedding, 2·L sublayers, one partial sum.
  int64_t decode_slots(const MicroLMConfig& c) const override { return 2 * c.layers + 2; }
  const float* decode(DecodeStep<float>& step) const override { return run(step); }
  const double* decode(DecodeStep<double>& step) const override { return run(step); }

 private:
  template <class T>
  const T* run(DecodeStep<T>& s) const {
    const int64_t n = s.n, D = s.config.dim;
    // Sources S_0 .. S_{done−1} complete, the current block's partial sum in slot `done` when
    // `partial`; a finished sublayer's output is added into that slot (forward's
    // finish_sublayer), which becomes a source when the block is full.
    int64_t done = 1, sublayers = 0;
    bool partial = false;
    auto finish_sublayer = [&](const T* sub) {
      T* slot = s.source(done);
      if (partial) {
        for (int64_t i = 0; i < n * D; ++i) slot[i] = slot[i] + sub[i];
      } else if (slot != sub) {
        std::memcpy(slot, sub, sizeof(T) * n * D);
      }
      partial = ++sublayers % s.config.attnres_block_size != 0;
      if (!partial) ++done;
    };
    auto current = [&] { return done + (partial ? 1 : 0); };
    for (int64_t l = 0; l < s.config.layers; ++l) {
      const MicroBlock& block = *s.model.blocks[l];
      s.pseudo_query_mix(current(), block.attn_query, s.mix_qk);
      s.norm(s.u_qk, s.mix_qk, *block.attention_norm);
      const T* u_v = s.u_qk;
      if (v_query_) {
        s.pseudo_query_mix(current(), block.attn_v_query, s.mix_v);
        s.norm(s.u_v, s.mix_v, *block.attention_norm);
        u_v = s.u_v;
      }
      T* sub = partial ? s.sublayer : s.source(done);
      s.attention(block, l, s.u_qk, u_v, sub, nullptr);
      finish_sublayer(sub);
      s.pseudo_query_mix(current(), block.ffn_query, s.mix_qk);
      s.norm(s.u_qk, s.mix_qk, *block.ffn_norm);
      sub = partial ? s.sublayer : s.source(done);
      s.feed_forward(*block.ffn, s.u_qk, sub, nullptr);
      finish_sublayer(sub);
    }
    s.pseudo_query_mix(current(), s.model.final_query, s.mix_qk);
    return s.mix_qk;
  }

  bool v_query_;
};

}  // namespace

const Residual& make_paper_block_attnres() {
  static const PaperAttnRes mode(false);
  return mode;
}
const Residual& make_paper_rd_attnres() {
  static const PaperAttnRes mode(true);
  return mode;
}

}  // namespace dg
