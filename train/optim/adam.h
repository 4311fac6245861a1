// Adam and AdamW (torch 1.13's update order, single-tensor path): one kernel for both, AdamW
// decaying the parameter (decoupled weight decay), Adam adding the decay to the gradient (L2).
// Their bias corrections are adam_step_scales, built in one place for every span.
#pragma once
#include <cstdint>

#include "train/optim/optimizer.h"

namespace dg {

struct AdamWConfig {
  double lr = 6e-4;  // the rate step() uses (a schedule or set_lr changes it)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  DecayPolicy decay = DecayPolicy::all;  // the flat path only; groups set weight_decay instead
};

// torch.optim.Adam's settings (its defaults: lr 1e-3, no weight decay).
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient (g + wd·p) before the moments
};

// Adam's bias corrections at step `step` (counted from 1): the step size lr / (1 − β1^step) and
// √(1 − β2^step), in double; the update divides √v by the second (torch 1.13's single-tensor
// order). The one place Adam's and AdamW's step constants come from.
struct AdamStepScales {
  double step_size = 0;  // lr / (1 − β1^step)
  double bc2_sqrt = 0;   // √(1 − β2^step)
};
AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step);

// AdamW. Over a module's flat buffers, every parameter in one group whose decay follows
// config.decay; over tensors or groups, each tensor keeps its own moments and step count (a
// tensor without a gradient is skipped, as in torch). The two give the same bits on the same
// parameters (tests/test_optim.cpp). State: "exp_avg", "exp_avg_sq"; the scalar "step".
class AdamW : public ElementwiseOptimizer {
 public:
  AdamW(FlatParameters& params, const AdamWConfig& config);
  // Sharded (ZeRO stage 1): keeps m and v for elements [shard_begin, shard_end) of the flat
  // buffer only and updates only those parameters. Each element's update is the unsharded one.
  AdamW(FlatParameters& params, const AdamWConfig& config, int64_t shard_begin, int64_t shard_end);
  // Over the module's own flat buffers (module.flat_parameters()): the usual way.
  AdamW(Module& module, const AdamWConfig& config) : AdamW(module.flat_parameters(), config) {}
  // Over any tensors, or parameter groups (config.decay does not apply: set weight_decay per
  // group).
  AdamW(std::vector<Tensor> params, const AdamWConfig& config);
  AdamW(std::vector<ParamGroup> groups, const AdamWConfig& config);
  std::string name() const override { return "AdamW"; }
  // Moments as flat tensors (for checkpoints): [total] each ([shard_end - shard_begin] sharded).
  // The flat path only; over tensors, exp_avg(i) and exp_avg_sq(i) are parameter i's (in group
  // order), undefined until its first step.
  Tensor& exp_avg() { return flat_state(0); }
  Tensor& exp_avg_sq() { return flat_state(1); }
  const Tensor& exp_avg(size_t i) const { return tensor_state(i, 0); }
  const Tensor& exp_avg_sq(size_t i) const { return tensor_state(i, 1); }
  const AdamWConfig& config() const { return config_; }

 protected:
  std::vector<StateTensor> state_layout() const override;
  void update(const UpdateSpan<float>& span) const override;
  void update(const UpdateSpan<double>& span) const override;

 private:
  AdamWConfig config_;
};

// torch.optim.Adam: weight decay is added to the gradient (g + wd·p) before the moments, not
// decoupled from them as AdamW's. Over a module's flat buffers (every parameter decays) or over
// tensors or groups. State: "exp_avg", "exp_avg_sq"; the scalar "step".
class Adam : public ElementwiseOptimizer {
 public:
  Adam(FlatParameters& params, const AdamConfig& config);
  Adam(Module& module, const AdamConfig& config) : Adam(module.flat_parameters(), config) {}
  Adam(std::vector<Tensor> params, const AdamConfig& config);
  Adam(std::vector<ParamGroup> groups, const AdamConfig& config);
  std::string name() const override { return "Adam"; }
  const AdamConfig& config() const { return config_; }

 protected:
  std::vector<StateTensor> state_layout() const override;
  void update(const UpdateSpan<float>& span) const override;
  void update(const UpdateSpan<double>& span) const override;

 private:
  AdamConfig config_;
};

}  // namespace dg
