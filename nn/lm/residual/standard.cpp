// The standard residual mode: the pre-norm LLaMA block, x = c + Attn(N(c)); y = x + FFN(N(x)),
// one stream from block to block. It has no parameters of its own and reads no earlier block
// but the last; it is the control the AttnRes modes are compared with.
#include "nn/lm/decode.h"
#include "nn/lm/micro_lm.h"
#include "tensor/exercise.h"

namespace dg {

// c [B, T, D] -> y [B, T, D]. Pre-norm: each sublayer reads a normalised copy of the stream and
// adds its output to the un-normalised stream, so the stream itself is never normalised.
DG_EXERCISE Tensor pre_norm_block(MicroBlock& block, const Tensor& c) {
  Tensor u = (*block.attention_norm)(c);
  Tensor x = (*block.attention)(u, u, c);
  // x = c + Attn(..), y = x + FFN(N(x)): each residual add happens inside the output projection
  return (*block.ffn)((*block.ffn_norm)(x), x);
}

namespace {

class Standard final : public Residual {
 public:
  // sources = {c}, c [B, T, D] -> y [B, T, D]
  Tensor block_forward(MicroBlock& block, const std::vector<Tensor>& sources) const override {
    return pre_norm_block(block, sources.back());
  }

  // h0 [B, T, D] -> the last block's output [B, T, D]
  Tensor forward(MicroLM& model, const Tensor& h0) const override {
    Tensor h = h0;
    for (MicroBlock* block : model.blocks) h = (*block)(std::vector<Tensor>{h});
    return h;
  }

  // The stream alternates between two slots: block l reads slot l % 2 and writes the other.
  int64_t decode_slots(const MicroLMConfig&) const override { return 2; }
  const float* decode(DecodeStep<float>& step) const override { return run(step); }
  const double* decode(DecodeStep<double>& step) const override { return run(step); }

 private:
  template <class T>
  static const T* run(DecodeStep<T>& s) {
    const int64_t L = s.config.layers;
    for (int64_t l = 0; l < L; ++l) {
      const MicroBlock& block = *s.model.blocks[l];
      const T* c = s.source(l % 2);
      s.norm(s.u_qk, c, *block.attention_norm);
      s.attention(block, l, s.u_qk, s.u_qk, s.x, c);  // x = c + Attn(N(c))
      s.norm(s.normed, s.x, *block.ffn_norm);
      s.feed_forward(*block.ffn, s.normed, s.source((l + 1) % 2), s.x);  // y = x + FFN(N(x))
    }
    return s.source(L % 2);
  }
};

}  // namespace

const Residual& make_standard() {
  static const Standard mode;
  return mode;
}

}  // namespace dg
