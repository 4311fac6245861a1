// Gradient clipping by global norm (torch.nn.utils.clip_grad_norm_), over a module's flat
// buffer or any tensors, and in parts for gradients spread over processes (ZeRO-2). The total
// norm is a function of fixed blocks, so its bits depend on neither the thread count nor which
// process summed a block.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace dg {

// torch.nn.utils.clip_grad_norm_: total = ‖all gradients‖₂; every gradient is multiplied by
// min(1, max_norm / (total + 1e-6)). Returns the pre-clip total norm.
struct ClipResult {
  double total_norm = 0;
  bool clipped = false;  // total_norm > max_norm
};
ClipResult clip_grad_norm(FlatParameters& params, double max_norm);
inline ClipResult clip_grad_norm(Module& module, double max_norm) {
  return clip_grad_norm(module.flat_parameters(), max_norm);
}
// The same over any tensors (a tensor without a gradient is skipped; one listed twice counts
// once): the flat overload's bits on the same parameters. Throws naming a gradient that is not
// contiguous or not floating point, and a max_norm that is negative or not finite.
ClipResult clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// clip_grad_norm in parts, for gradients spread over processes (train/data_parallel.h): the
// flat gradient is cut into blocks (each slot into runs of at most 8192 elements); a block's sum
// of squares depends only on its elements, and the total norm only on the block sums in order, so
// any owner of a block computes the same bits, and clip_grad_norm is these three calls.
struct GradientNormBlocks {
  std::vector<int64_t> begin, end;       // element range of each block, in flat order
  std::vector<size_t> slot_first_block;  // per slot its first block; one past the last at the end
};
GradientNormBlocks gradient_norm_blocks(const FlatParameters& params);
// Σ g² over gradient elements [begin, end) in double, in a fixed order (one block's sum).
double gradient_sum_of_squares(const FlatParameters& params, int64_t begin, int64_t end);
// The total norm from every block's sum (torch's order: per-parameter norms, then their norm).
double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
                                  const double* block_sums);
// Multiplies gradient elements [begin, end) by min(1, max_norm / (total_norm + 1e-6)).
ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end);

}  // namespace dg
