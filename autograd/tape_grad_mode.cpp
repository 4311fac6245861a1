// Grad mode: the thread's switch that says whether ops record (see tape.h). Its flag,
// detail::grad_mode, lives in tensor/tensor.h (a tensor made while it was off says so).
#include "autograd/tape.h"

namespace dg {

bool grad_enabled() { return detail::grad_mode; }
NoGradGuard::NoGradGuard() : previous_(detail::grad_mode) { detail::grad_mode = false; }
NoGradGuard::~NoGradGuard() { detail::grad_mode = previous_; }

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!detail::grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!detail::grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

}  // namespace dg
