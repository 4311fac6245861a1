// Wrong answer to scale_gradients_for_clip: the coefficient inverted, total / max_norm: a
// gradient twice too long is doubled instead of halved.
#include <algorithm>

#include "train/optim.h"

namespace dg {

ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end) {
  ClipResult r;
  r.total_norm = total_norm;
  r.clipped = total_norm > max_norm;
  const double coef = std::max(1.0, total_norm / max_norm);
  if (params.gradients.dtype() == DType::f32) {
    float* g = params.gradients.data<float>();
    for (int64_t i = begin; i < end; ++i) g[i] *= static_cast<float>(coef);
  } else {
    double* g = params.gradients.data<double>();
    for (int64_t i = begin; i < end; ++i) g[i] *= coef;
  }
  return r;
}

}  // namespace dg
