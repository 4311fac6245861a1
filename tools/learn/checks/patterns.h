// Building blocks that chapters 4 and 5's checks share: float64 inputs of exact values (the same
// the golden scripts tools/learn/goldens_ch04.py and goldens_ch05.py build, so PyTorch's values
// can be compared at 1e-12), the loss weights that expose transpose and broadcast mistakes, and
// two verdicts joined. It holds no check of its own.
#pragma once
#include <cstdint>
#include <vector>

#include "tools/learn/grade.h"

namespace dg::learn {

// Both verdicts: the first failure, or both details when both pass.
inline Verdict both(const Verdict& first, const Verdict& second) {
  if (!first.passed) return first;
  return {second.passed, first.detail + "; " + second.detail};
}

// ((k·mul) mod m − shift) / div for k = 0, 1, ..: exact in float64, the same as the scripts'.
inline Tensor pattern(const Shape& shape, int64_t mul, int64_t m, int64_t shift, double div,
                      bool leaf = false) {
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<double>((static_cast<int64_t>(k) * mul) % m - shift) / div;
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  if (leaf) t.set_requires_grad(true);
  return t;
}

// G: the weights of the loss sum(y ⊙ G), a pattern of y's shape (not all ones: a plain sum
// hides transpose and broadcast mistakes).
inline Tensor weights_for(const Tensor& y) { return pattern(y.shape(), 3, 11, 5, 4.0); }

}  // namespace dg::learn
