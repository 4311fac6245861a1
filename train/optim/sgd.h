// torch.optim.SGD: momentum, dampening, Nesterov and (L2) weight decay. Its update is sgd_update,
// one call per span (ElementwiseOptimizer runs it over tensors, groups and the flat buffer).
#pragma once
#include <cstdint>

#include "train/optim/optimizer.h"

namespace dg {

struct SGDConfig {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0, as torch
};

// torch.optim.SGD's update of n elements (a span of one group: a tensor, a slot of the flat
// buffer, or a chunk of one):
//   d = g + weight_decay·p
//   with momentum: buf = d on the first step, else momentum·buf + (1 − dampening)·d;
//                  d = d + momentum·buf (Nesterov) or d = buf
//   p = p − lr·d
// lr and weight_decay are the group's at this step (a schedule moves lr; a group may have its
// own weight decay), not config's; config gives momentum, dampening and Nesterov. p, g,
// momentum_buffer [n] (momentum_buffer is null without momentum); the buffers do not overlap.
// Called once per span, never per element.
void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first);
void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first);

// Over a module's flat buffers, tensors or groups. State: "momentum_buffer" (none without
// momentum); the scalar "step".
class SGD : public ElementwiseOptimizer {
 public:
  SGD(FlatParameters& params, const SGDConfig& config);
  // Positional arguments in torch.optim.SGD's order: SGD(model, 0.1) is lr = 0.1.
  SGD(FlatParameters& params, double lr = 1e-2, double momentum = 0.0, double weight_decay = 0.0)
      : SGD(params, SGDConfig{.lr = lr, .momentum = momentum, .weight_decay = weight_decay}) {}
  SGD(Module& module, const SGDConfig& config) : SGD(module.flat_parameters(), config) {}
  SGD(Module& module, double lr = 1e-2, double momentum = 0.0, double weight_decay = 0.0)
      : SGD(module.flat_parameters(), lr, momentum, weight_decay) {}
  SGD(std::vector<Tensor> params, const SGDConfig& config);
  SGD(std::vector<ParamGroup> groups, const SGDConfig& config);
  std::string name() const override { return "SGD"; }
  Tensor& momentum_buffer();  // the flat path's (undefined without momentum)
  const SGDConfig& config() const { return config_; }

 protected:
  std::vector<StateTensor> state_layout() const override;
  void update(const UpdateSpan<float>& span) const override;
  void update(const UpdateSpan<double>& span) const override;

 private:
  SGDConfig config_;
};

}  // namespace dg
