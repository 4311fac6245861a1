// Wrong answer to broadcast_reduction_axes: target's axes compared with the broadcast's from the
// left (target[k] against broadcast[k]) and the extra axes taken at the end. Broadcasting aligns
// the last axes: w [3, 1] in a [2, 3, 4] product must be summed over axes 0 and 2.
#include "tensor/shape.h"

namespace dg {

std::vector<int64_t> broadcast_reduction_axes(const Shape& target, const Shape& broadcast) {
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < static_cast<int64_t>(broadcast.size()); ++k)
    if (k >= static_cast<int64_t>(target.size()) || (target[k] == 1 && broadcast[k] != 1))
      axes.push_back(k);
  return axes;
}

}  // namespace dg
