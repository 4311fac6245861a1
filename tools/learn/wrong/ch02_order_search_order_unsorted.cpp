// Wrong answer to backward_order: the depth-first search's own order, not sorted by creation
// number. In a diamond (a read by exp and by scale) the search can reach a before one of its
// readers has run, so a's gradient is used before it is complete.
#include <unordered_set>

#include "autograd/tape.h"

namespace dg {

std::vector<Tensor> backward_order(const std::vector<Tensor>& roots) {
  std::vector<Tensor> order;
  std::vector<Tensor> stack;
  std::unordered_set<uint64_t> found;
  auto visit = [&](const Tensor& t) {
    if (recorded_op(t) == nullptr) return;
    if (!found.insert(recorded_sequence(t)).second) return;
    stack.push_back(t);
  };
  for (const Tensor& root : roots) visit(root);
  while (!stack.empty()) {
    Tensor t = std::move(stack.back());
    stack.pop_back();
    for (const Tensor& in : recorded_inputs(t)) visit(in);
    order.push_back(std::move(t));
  }
  return order;
}

}  // namespace dg
