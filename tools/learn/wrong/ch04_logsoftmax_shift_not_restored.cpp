// Wrong answer to plain_log_softmax_rows: the log-sum-exp of the shifted logits subtracted from the
// unshifted ones: x − log Σ exp(x − m) is off by m in every row (the shift applied on one side
// only). The gradient is still right, the loss is not.
#include <algorithm>
#include <vector>

#include "autograd/op_steps.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

Tensor plain_log_softmax_rows(const Tensor& logits) {
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor x = detach(logits).contiguous().to(DType::f64);
  std::vector<double> row_max(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    row_max[n] = x.data<double>()[n * C];
    for (int64_t c = 1; c < C; ++c) row_max[n] = std::max(row_max[n], x.data<double>()[n * C + c]);
  }
  const Tensor m = Tensor::from_vector(row_max, {N, 1}, logits.dtype());
  return sub(logits, log(sum(exp(sub(logits, m)), {1}, /*keepdim=*/true)));
}

}  // namespace dg
