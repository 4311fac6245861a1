// Wrong answer to total_norm_from_block_sums: the per-parameter norms squared and summed, and the
// square root of that sum forgotten: the squared norm is returned. Every clip then compares
// max_norm with ‖g‖² and clips far too often (or too rarely below 1).
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
    double sq = 0;
    for (size_t b = blocks.slot_first_block[s]; b < blocks.slot_first_block[s + 1]; ++b)
      sq += block_sums[b];
    const double norm = rounded(params, std::sqrt(sq));
    total_sq += norm * norm;
  }
  return rounded(params, total_sq);
}

}  // namespace dg
