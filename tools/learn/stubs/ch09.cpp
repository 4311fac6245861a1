// Chapter 9's exercises (nn/learn-09-attention-gpt.md): write the two functions below, then run
// `make learn CHAPTER=9`. Each replaces the library's version everywhere the library calls it.
//   causal_mask     the additive mask [T, T] of the plain attentions: 0 where key j <= query i,
//                   −inf where j > i (autograd/ops.h)
//   pre_norm_block  the standard block: x = c + Attn(N(c), N(c)); y = x + FFN(N(x))
//                   (nn/lm/micro_lm.h)
#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "tools/learn/grade.h"

namespace dg {

Tensor causal_mask(int64_t T, DType dtype) { dg::learn::not_written("causal_mask"); }

Tensor pre_norm_block(MicroBlock& block, const Tensor& c) {
  dg::learn::not_written("pre_norm_block");
}

}  // namespace dg
