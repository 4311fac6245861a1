// Wrong answer to scale_gradients_for_clip: the loop stops one element early (i < end - 1). The
// last gradient element of the range keeps its unclipped value.
#include <algorithm>

#include "train/optim.h"

namespace dg {

ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end) {
  ClipResult r;
  r.total_norm = total_norm;
  r.clipped = total_norm > max_norm;
  const double coef = std::min(1.0, max_norm / (total_norm + 1e-6));
  if (params.gradients.dtype() == DType::f32) {
    float* g = params.gradients.data<float>();
    for (int64_t i = begin; i < end - 1; ++i) g[i] *= static_cast<float>(coef);
  } else {
    double* g = params.gradients.data<double>();
    for (int64_t i = begin; i < end - 1; ++i) g[i] *= coef;
  }
  return r;
}

}  // namespace dg
