// Wrong answer to calculate_fans: a 1-D tensor (a bias) accepted, with both fans its size. torch
// refuses: a vector has no fan in or fan out, and a xavier_ on a bias is a mistake to report.
#include "nn/init.h"

namespace dg {

init::Fans init::calculate_fans(const Tensor& t) {
  if (t.dim() < 2) return Fans{t.numel(), t.numel()};
  int64_t receptive_field = 1;
  for (int64_t k = 2; k < t.dim(); ++k) receptive_field *= t.size(k);
  return Fans{t.size(1) * receptive_field, t.size(0) * receptive_field};
}

}  // namespace dg
