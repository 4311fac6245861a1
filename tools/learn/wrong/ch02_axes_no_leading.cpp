// Wrong answer to broadcast_reduction_axes: only the axes where the target has size 1 are summed;
// the leading axes the broadcast added in front are forgotten. A bias [4] added to x [3, 4] then
// gets a [3, 4] gradient that accumulate_grad cannot fit into [4].
#include "tensor/shape.h"

namespace dg {

std::vector<int64_t> broadcast_reduction_axes(const Shape& target, const Shape& broadcast) {
  const int64_t lead = static_cast<int64_t>(broadcast.size() - target.size());
  std::vector<int64_t> axes;
  for (int64_t k = lead; k < static_cast<int64_t>(broadcast.size()); ++k)
    if (target[k - lead] == 1 && broadcast[k] != 1) axes.push_back(k);
  return axes;
}

}  // namespace dg
