// Wrong answer to pre_norm_block: the feed-forward's output not added to the stream: y =
// FFN(N(x)) instead of x + FFN(N(x)). The block then replaces the stream instead of adding to it;
// deep stacks lose their residual path.
#include "nn/lm/micro_lm.h"

namespace dg {

Tensor pre_norm_block(MicroBlock& block, const Tensor& c) {
  Tensor u = (*block.attention_norm)(c);
  Tensor x = (*block.attention)(u, u, c);
  return (*block.ffn)((*block.ffn_norm)(x));
}

}  // namespace dg
