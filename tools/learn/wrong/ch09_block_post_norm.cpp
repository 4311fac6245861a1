// Wrong answer to pre_norm_block: post-norm (the original Transformer's), x = N(c + Attn(c)),
// y = N(x + FFN(x)): the stream itself normalised after each sublayer. A different model: its
// values are not the pre-norm block's.
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pre_norm_block(MicroBlock& block, const Tensor& c) {
  Tensor x = (*block.attention_norm)((*block.attention)(c, c, c));
  return (*block.ffn_norm)((*block.ffn)(x, x));
}

}  // namespace dg
