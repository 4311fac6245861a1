// Wrong answer to backward_order: sorted by creation number the wrong way round, oldest first.
// The walk then runs the first op recorded (whose output's gradient nothing has written yet)
// before the root: every gradient comes out zero or missing.
#include <algorithm>
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
  std::sort(order.begin(), order.end(), [](const Tensor& a, const Tensor& b) {
    return recorded_sequence(a) < recorded_sequence(b);
  });
  return order;
}

}  // namespace dg
