// Wrong answer to pre_norm_block: the feed-forward reads the stream x itself, not its normalised
// copy N(x) (ffn_norm forgotten). The stream grows with depth and the FFN's input with it.
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pre_norm_block(MicroBlock& block, const Tensor& c) {
  Tensor u = (*block.attention_norm)(c);
  Tensor x = (*block.attention)(u, u, c);
  return (*block.ffn)(x, x);
}

}  // namespace dg
