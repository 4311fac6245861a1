// Wrong answer to total_norm_from_block_sums: each parameter's first block only (one block per
// slot assumed). A parameter larger than a block (8192 elements) has its tail left out of the
// norm.
#include <cmath>

#include "train/optim.h"

namespace dg {
namespace {
// A value rounded to the gradients' precision (float32 or float64), as torch's norms are.
double rounded(const FlatParameters& params, double v) {
  return params.gradients.dtype() == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
}
}  // namespace

double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
                                  const double* block_sums) {
  double total_sq = 0;
  for (size_t s = 0; s < params.slots.size(); ++s) {
    const double norm = rounded(params, std::sqrt(block_sums[blocks.slot_first_block[s]]));
    total_sq += norm * norm;
  }
  return rounded(params, std::sqrt(total_sq));
}

}  // namespace dg
