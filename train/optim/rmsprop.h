// torch.optim.RMSprop: a running average of squared gradients divides the step; centered and
// momentum variants.
#pragma once

#include "train/optim/optimizer.h"

namespace dg {

// torch.optim.RMSprop's settings (its defaults). torch accepts alpha > 1, which can make the
// squared average negative and the update NaN; here alpha must lie in [0, 1].
struct RMSpropConfig {
  double lr = 1e-2;
  double alpha = 0.99;  // decay of the squared-gradient average
  double eps = 1e-8;    // added to the root of the average, not inside it
  double weight_decay = 0;
  double momentum = 0;    // > 0 keeps a momentum buffer of the scaled gradients
  bool centered = false;  // divide by the gradient's estimated variance, not its second moment
};

// torch.optim.RMSprop: g ← g + wd·p; v ← α·v + (1 − α)·g²; with centered also ḡ ← α·ḡ + (1 − α)·g
// and d = √(v − ḡ²) + eps, else d = √v + eps; then with momentum b ← μ·b + g/d, p ← p − lr·b,
// else p ← p − lr·g/d. Over a module's flat buffers or over tensors or groups (a tensor without a
// gradient is skipped, as in torch). State: "square_avg", "momentum_buffer" (momentum > 0),
// "grad_avg" (centered); the scalar "step".
class RMSprop : public ElementwiseOptimizer {
 public:
  RMSprop(FlatParameters& params, const RMSpropConfig& config);
  RMSprop(Module& module, const RMSpropConfig& config)
      : RMSprop(module.flat_parameters(), config) {}
  RMSprop(std::vector<Tensor> params, const RMSpropConfig& config);
  RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& config);
  std::string name() const override { return "RMSprop"; }
  const RMSpropConfig& config() const { return config_; }

 protected:
  std::vector<StateTensor> state_layout() const override;
  void update(const UpdateSpan<float>& span) const override;
  void update(const UpdateSpan<double>& span) const override;

 private:
  RMSpropConfig config_;
};

}  // namespace dg
