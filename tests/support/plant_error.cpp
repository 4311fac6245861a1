// Planted errors through the tape's backward observer (see plant_error.h). It changes gradients
// after a node's backward has run and never touches a kernel; the library knows nothing about it.
#include "tests/support/plant_error.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "autograd/tape.h"

namespace dg::test {

namespace {

// The values of a gradient (zeros when undefined), as doubles.
std::vector<double> gradient_values(const Tensor& in) {
  std::vector<double> out(static_cast<size_t>(in.numel()), 0.0);
  const Tensor& g = in.impl()->grad;
  if (!g.defined()) return out;
  NoGradGuard no_grad;  // records nothing, whoever calls it (the walk has grad mode off already)
  Tensor c = g.to(DType::f64).contiguous();
  const double* p = c.data<double>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  return out;
}

class PlantError : public BackwardObserver {
 public:
  PlantError(std::string op, bool f32_only, bool second_order, bool list)
      : op_(std::move(op)), f32_only_(f32_only), second_order_(second_order), list_(list) {}

  void before(const ObservedNode& node) override {
    const std::vector<Tensor>& inputs = node.inputs;
    at_ = -1;
    if (list_ && listed_.insert(node.op).second) fmt::print(stderr, "op {}\n", node.op);
    if (list_ && node.made_by_backward_of && listed2_.insert(node.made_by_backward_of).second)
      fmt::print(stderr, "op2 {}\n", node.made_by_backward_of);
    // grad2: any node that op's backward recorded under create_graph (its second derivative)
    const char* target = second_order_ ? node.made_by_backward_of : node.op;
    if (!target || op_ != target) return;
    at_ = planted_input(inputs);
    if (at_ >= 0) before_ = gradient_values(inputs[at_]);
  }

  // Adds 1% of the largest element of this node's contribution (after - before) to the gradient;
  // 0.01 when the contribution is all zeros (sign, floor, ceil, round: a leaked gradient).
  void after(const ObservedNode& node) override {
    if (at_ < 0) return;
    const std::vector<Tensor>& inputs = node.inputs;
    const Tensor& in = inputs[at_];
    at_ = -1;
    const Tensor& g = in.impl()->grad;
    if (!g.defined() || !g.is_contiguous()) return;
    const std::vector<double> after = gradient_values(in);
    size_t at = 0;
    for (size_t i = 0; i < after.size(); ++i)
      if (std::fabs(after[i] - before_[i]) > std::fabs(after[at] - before_[at])) at = i;
    const double error = after[at] != before_[at] ? 0.01 * (after[at] - before_[at]) : 0.01;
    if (g.dtype() == DType::f32)
      g.data<float>()[at] += static_cast<float>(error);
    else
      g.data<double>()[at] += error;
  }

 private:
  // The input whose gradient the plant changes: the first floating one that requires grad.
  int planted_input(const std::vector<Tensor>& inputs) const {
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& in = inputs[k];
      if (in.defined() && in.requires_grad() && is_floating(in.dtype()) &&
          (!f32_only_ || in.dtype() == DType::f32))
        return static_cast<int>(k);
    }
    return -1;
  }

  std::string op_;
  bool f32_only_, second_order_, list_;
  std::set<std::string> listed_, listed2_;
  int at_ = -1;  // the planted input of the running node, or -1
  std::vector<double> before_;
};

}  // namespace

bool install_planted_error_from_env() {
  const char* value = std::getenv("DG_PLANT_ERROR");
  if (!value || !*value) return false;
  std::string op = value;
  const bool list = op == "list";
  bool f32_only = false, second_order = false;
  if (op.size() > 4 && op.compare(op.size() - 4, 4, ":f32") == 0) {
    f32_only = true;
    op.resize(op.size() - 4);
  }
  if (op.size() > 6 && op.compare(op.size() - 6, 6, ":grad2") == 0) {
    second_order = true;
    op.resize(op.size() - 6);
  }
  static PlantError plant(op, f32_only, second_order, list);  // lives as long as the program
  set_backward_observer(&plant);
  return true;
}

}  // namespace dg::test
