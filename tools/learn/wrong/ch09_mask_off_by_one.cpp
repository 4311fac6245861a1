// Wrong answer to causal_mask: keys up to i + 1 left visible (j > i + 1). Each query reads one
// position of the future: a language model trained with it learns to copy the next token and
// fails at generation.
#include <fmt/format.h>

#include <limits>
#include <stdexcept>
#include <vector>

#include "autograd/ops.h"

namespace dg {

Tensor causal_mask(int64_t T, DType dtype) {
  if (T < 0 || !is_floating(dtype))
    throw std::invalid_argument(fmt::format("causal_mask: bad T {} or dtype", T));
  std::vector<double> hidden(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (j > i + 1) hidden[i * T + j] = -std::numeric_limits<double>::infinity();
  return Tensor::from_vector(hidden, {T, T}, dtype);
}

}  // namespace dg
