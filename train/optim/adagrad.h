// torch.optim.Adagrad (dense gradients): each element's step shrinks with the sum of its squared
// gradients.
#pragma once

#include "train/optim/optimizer.h"

namespace dg {

// torch.optim.Adagrad's settings (its defaults).
struct AdagradConfig {
  double lr = 1e-2;
  double lr_decay = 0;  // the rate at step t (from 1) is lr / (1 + (t − 1)·lr_decay)
  double weight_decay = 0;
  double initial_accumulator_value = 0;  // the sum of squares starts here
  double eps = 1e-10;
};

// torch.optim.Adagrad: g ← g + wd·p; s ← s + g²; p ← p − clr·g/(√s + eps) with
// clr = lr / (1 + (t − 1)·lr_decay), t the parameter's own step count. Over a module's flat
// buffers (one count) or over tensors or groups (a count per tensor; one without a gradient is
// skipped and its count stays). Sparse gradients do not exist here. State: "sum"; the scalar
// "step".
class Adagrad : public ElementwiseOptimizer {
 public:
  Adagrad(FlatParameters& params, const AdagradConfig& config);
  Adagrad(Module& module, const AdagradConfig& config)
      : Adagrad(module.flat_parameters(), config) {}
  Adagrad(std::vector<Tensor> params, const AdagradConfig& config);
  Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& config);
  std::string name() const override { return "Adagrad"; }
  const AdagradConfig& config() const { return config_; }

 protected:
  std::vector<StateTensor> state_layout() const override;
  void update(const UpdateSpan<float>& span) const override;
  void update(const UpdateSpan<double>& span) const override;

 private:
  AdagradConfig config_;
};

}  // namespace dg
