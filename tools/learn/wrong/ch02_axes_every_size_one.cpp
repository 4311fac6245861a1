// Wrong answer to broadcast_reduction_axes: every axis where the target has size 1 is summed, even
// when the broadcast shape has size 1 there too (nothing was broadcast). Summing a size-1 axis
// changes no value, but the axes differ from what the sum needs ([1, 1] against [1, 6]: only
// axis 1).
#include "tensor/shape.h"

namespace dg {

std::vector<int64_t> broadcast_reduction_axes(const Shape& target, const Shape& broadcast) {
  const int64_t lead = static_cast<int64_t>(broadcast.size() - target.size());
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < static_cast<int64_t>(broadcast.size()); ++k)
    if (k < lead || target[k - lead] == 1) axes.push_back(k);
  return axes;
}

}  // namespace dg
