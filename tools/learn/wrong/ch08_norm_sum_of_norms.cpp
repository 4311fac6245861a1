// Wrong answer to total_norm_from_block_sums: the parameters' norms added (an L1 norm of norms)
// instead of combined as the square root of their squares. Larger than torch's total whenever two
// parameters have gradients.
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
  double total = 0;
  for (size_t s = 0; s < params.slots.size(); ++s) {
    double sq = 0;
    for (size_t b = blocks.slot_first_block[s]; b < blocks.slot_first_block[s + 1]; ++b)
      sq += block_sums[b];
    total += rounded(params, std::sqrt(sq));
  }
  return rounded(params, total);
}

}  // namespace dg
