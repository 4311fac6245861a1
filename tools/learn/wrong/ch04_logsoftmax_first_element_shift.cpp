// Wrong answer to plain_log_softmax_rows: each row shifted by its first element instead of its
// max. Any shift gives the same log p in real numbers, but only the max keeps every exp(x − m) at
// most 1: the row [-1000, 0, 1000] shifted by -1000 takes exp(2000) = inf.
#include <vector>

#include "autograd/op_steps.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace dg {

Tensor plain_log_softmax_rows(const Tensor& logits) {
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor x = detach(logits).contiguous().to(DType::f64);
  std::vector<double> first(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) first[n] = x.data<double>()[n * C];
  const Tensor m = Tensor::from_vector(first, {N, 1}, logits.dtype());
  const Tensor shifted = sub(logits, m);
  return sub(shifted, log(sum(exp(shifted), {1}, /*keepdim=*/true)));
}

}  // namespace dg
