// Optimisers, gradient clipping and learning-rate schedules, as in torch.optim: AdamW, Adam,
// SGD (momentum, dampening, Nesterov), RMSprop and Adagrad over any list of tensors or parameter
// groups (each with its own rate and weight decay), and over a module's flat buffers (nn/module.h)
// as FlatOptimizers, the interface the Trainer drives (a user's own optimiser implements it too),
// the fast path the trainer uses: one pass over contiguous memory, nothing allocated per step.
// Optimisers do not compute gradients or own the model; a schedule sets an optimiser's rates,
// nothing else.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace dg {

// Which parameters weight decay applies to.
enum class DecayPolicy {
  all,           // every parameter (torch AdamW default; the reference's setting)
  matrices_only  // only 2-D weights that are not routes or pseudo-queries (no norms, biases,
                 // routes)
};
DecayPolicy parse_decay_policy(const std::string& text);  // "all" | "matrices"
const char* decay_policy_name(DecayPolicy policy);

struct AdamWConfig {
  double lr = 6e-4;  // the rate step() uses (a schedule or set_lr changes it)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  DecayPolicy decay = DecayPolicy::all;  // the flat path only; groups set weight_decay instead
};

// Parameters that share a rate and a weight decay (one of torch's param_groups). An unset value
// takes the optimiser's config; once the optimiser holds the group, both are set.
struct ParamGroup {
  std::vector<Tensor> params = {};
  std::optional<double> lr = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
};

// The grouping nanoGPT's configure_optimizers and timm's param_groups_weight_decay make: the
// module's parameters of two or more dimensions (matmul and embedding weights, convolution
// kernels) in group 0 with `weight_decay`, the rest (biases, norms' weights and biases) in group
// 1 with weight decay 0, each in registration order. Either group may be empty (the optimiser
// accepts one empty group beside a full one, as torch does).
//   dg::AdamW opt(dg::weight_decay_groups(model, 0.1), {.lr = 6e-4});  // then dg::Trainer
std::vector<ParamGroup> weight_decay_groups(const Module& module, double weight_decay);

// What every optimiser offers a training loop and a schedule (LrScheduler below).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient, at each group's current rate.
  virtual void step() = 0;
  // Sets every group's rate to lr, then step(): for callers that compute the rate themselves.
  void step(double lr) {
    set_lr(lr);
    step();
  }
  // Zeroes the gradients of the optimiser's parameters in place (torch's zero_grad with
  // set_to_none=False: a gradient that is a view into a flat buffer stays one).
  virtual void zero_grad();
  std::vector<ParamGroup>& param_groups() { return groups_; }
  std::vector<Tensor> parameters() const;  // every group's, in order
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  double lr(size_t group = 0) const;
  void set_lr(double lr);                // every group
  void set_lr(size_t group, double lr);  // one group

 protected:
  // Fills each group's unset rate and weight decay; refuses empty groups, a tensor listed twice,
  // tensors that are not contiguous floating-point ones, and negative or non-finite values.
  void set_groups(std::vector<ParamGroup> groups, double lr, double weight_decay, const char* who);
  std::vector<ParamGroup> groups_;
};

// What the Trainer (train/trainer.h) needs of an optimiser, and the base of one a user writes:
// it updates a module's flat parameter buffer, elements [shard_begin, shard_end) of it (all of
// them, or with ZeRO-1 this rank's shard), and its state is per-element tensors over that range
// plus integer scalars (step counts). The Trainer saves both in training checkpoints (tensor
// "optimizer.<state>.<parameter>", metadata "depthgrad.optimizer.<scalar>", the name as
// "depthgrad.optimizer"), and with ZeRO-1 gathers the per-element state from the ranks' shards
// and hands each rank its part. A subclass implements name(), step() (Optimizer's),
// element_state(), reset_state() and, when it has any, the scalars; one whose per-element state
// cannot be cut over ranks says so in shardable(), and ZeRO-1 is refused naming it.
class FlatOptimizer : public Optimizer {
 public:
  // The name in checkpoints and errors: "AdamW", "Adam", "SGD", or the user's.
  virtual std::string name() const = 0;
  // The per-element state: tensors of shard_end() − shard_begin() elements in the parameters'
  // dtype, by name; element i of a tensor belongs to element shard_begin() + i of the flat buffer.
  // They are the optimiser's own: a checkpoint is loaded by writing into them.
  virtual std::vector<NamedTensor> element_state() = 0;
  // Integer state by name; set_scalar_state gets the names scalar_state gave. A scalar "step"
  // counts the optimizer steps taken: a resume checks it against the loop's count.
  virtual std::map<std::string, int64_t> scalar_state() const { return {}; }
  virtual void set_scalar_state(const std::map<std::string, int64_t>& /*scalars*/) {}
  // False when an element's state is not a function of that element alone (ZeRO-1 is refused).
  virtual bool shardable() const { return true; }
  // ZeRO stage 1: keeps state for, and updates, elements [begin, end) only; the state restarts
  // (reset_state). Refused over tensors and when !shardable().
  void shard(int64_t begin, int64_t end);
  FlatParameters* flat_parameters() const { return params_; }  // null over tensors
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_end() const { return shard_end_; }
  void zero_grad() override;
  // Over groups of a module's parameters (made from tensors or ParamGroups, before any step):
  // moves the optimiser onto the module's flat buffer `params`, each parameter keeping its
  // group's rate and weight decay (a parameter of the module in no group is not updated, as in
  // torch); the Trainer calls it, so an optimiser made from groups trains, checkpoints, resumes
  // and shards (ZeRO) as one made from the module. Its per-element state then lives over the flat
  // buffer, one step count for all (the flat path's: a parameter without a gradient has a zero
  // one in the flat buffer and is updated, where torch would skip it). AdamW's config.decay does
  // not apply: the groups' weight_decay does. Refused after a step, on a flat optimiser, and when
  // a group holds a tensor that is not a parameter of `params`, naming it.
  void use_flat_buffer(FlatParameters& params);
  // The group of each slot of the flat buffer (SIZE_MAX: in no group); empty when every slot is
  // in group 0 (made from the module).
  const std::vector<size_t>& slot_groups() const { return slot_group_; }
  // One slot's rate and weight decay at this step (active false: in no group, not updated).
  struct SlotRate {
    double lr = 0, weight_decay = 0;
    bool active = true;
  };

 protected:
  // Per slot: its group's rate and weight decay; over one group, decays[s] false sets slot s's
  // weight decay to 0 (AdamW's DecayPolicy), and null decays every slot.
  std::vector<SlotRate> slot_rates(const std::vector<bool>* decays) const;
  // fn(begin, end, rate) for each slot's elements within [shard_begin, shard_end) that a group
  // updates; made from the module: one call over the whole shard with group 0's rates.
  void for_each_run(const std::function<void(int64_t, int64_t, const SlotRate&)>& fn) const;
  int64_t tensor_steps_ = 0;  // steps taken over tensors (use_flat_buffer refuses after one)
  std::vector<size_t> slot_group_;

  FlatOptimizer() = default;  // over tensors or groups: not one the Trainer can drive
  // Over `params` (not owned: the caller's, usually module.flat_parameters()), one group.
  FlatOptimizer(FlatParameters& params, double lr, double weight_decay, const char* who);
  // Allocates the per-element state for [shard_begin, shard_end), zeroed, and zeroes the scalars.
  virtual void reset_state() = 0;
  FlatParameters* params_ = nullptr;
  int64_t shard_begin_ = 0, shard_end_ = 0;
};

// Adam's bias corrections at step `step` (counted from 1): the step size lr / (1 − β1^step) and
// √(1 − β2^step), in double; the update divides √v by the second (torch 1.13's single-tensor
// order). Called once per step (per tensor over tensors) by AdamW and Adam.
struct AdamStepScales {
  double step_size = 0;  // lr / (1 − β1^step)
  double bc2_sqrt = 0;   // √(1 − β2^step)
};
AdamStepScales adam_step_scales(double lr, double beta1, double beta2, int64_t step);

namespace detail {
// Adam's moments and update, shared by AdamW (decoupled decay) and Adam (L2 added to the
// gradient): torch 1.13's single-tensor path, over a flat buffer's shard or over tensors.
class AdamMoments {
 public:
  struct Betas {
    double beta1, beta2, eps;
  };
  // The moments of n elements, zero. They are made when first needed (made(): a step, a look at
  // the state, a checkpoint's load), not here: the trainer shards an optimiser before its first
  // step (ZeRO), so a rank never holds the whole buffer's moments, even for a moment.
  void reset(int64_t n, DType dtype);
  void made();
  // Elements [begin, end) of `params`; slots with decays[s] take weight decay wd.
  void step_flat(FlatParameters& params, int64_t begin, int64_t end,
                 const std::vector<FlatOptimizer::SlotRate>& rates, const Betas& b, bool decoupled);
  void step_tensors(const std::vector<ParamGroup>& groups, const Betas& b, bool decoupled,
                    const char* who);
  void resize_tensors(size_t count) { tensor_state_.resize(count); }
  Tensor m, v;  // flat path: [shard] each (undefined until made())
  int64_t steps = 0;
  int64_t n_ = 0;
  DType dtype_ = DType::f32;
  bool deferred_ = false;  // reset() ran and made() has not
  struct TensorState {
    Tensor m, v;
    int64_t steps = 0;
  };
  std::vector<TensorState> tensor_state_;  // over tensors: per parameter, in group order
};
}  // namespace detail

// AdamW (torch 1.13's update order, single-tensor path). Over a module's flat buffers, every
// parameter in one group whose decay follows config.decay; over tensors or groups, each tensor
// keeps its own moments and step count (a tensor without a gradient is skipped, as in torch).
// The two give the same bits on the same parameters (tests/test_optim.cpp).
class AdamW : public FlatOptimizer {
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
  using Optimizer::step;
  void step() override;
  std::string name() const override { return "AdamW"; }
  // "exp_avg", "exp_avg_sq"; the scalar "step".
  std::vector<NamedTensor> element_state() override;
  std::map<std::string, int64_t> scalar_state() const override;
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  int64_t steps_taken() const { return adam_.steps; }
  // Moments as flat tensors (for checkpoints): [total] each ([shard_end - shard_begin] sharded).
  // The flat path only; over tensors, exp_avg(i) and exp_avg_sq(i) are parameter i's (in group
  // order), undefined until its first step.
  Tensor& exp_avg() {
    adam_.made();
    return adam_.m;
  }
  Tensor& exp_avg_sq() {
    adam_.made();
    return adam_.v;
  }
  const Tensor& exp_avg(size_t i) const { return adam_.tensor_state_.at(i).m; }
  const Tensor& exp_avg_sq(size_t i) const { return adam_.tensor_state_.at(i).v; }
  void set_steps_taken(int64_t step) { adam_.steps = step; }
  const AdamWConfig& config() const { return config_; }

 protected:
  void reset_state() override;

 private:
  AdamWConfig config_;
  std::vector<bool> slot_decays_;  // flat path: whether each slot decays under config.decay
  detail::AdamMoments adam_;
};

// torch.optim.Adam's settings (its defaults: lr 1e-3, no weight decay).
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient (g + wd·p) before the moments
};

// torch.optim.Adam: weight decay is added to the gradient (g + wd·p) before the moments, not
// decoupled from them as AdamW's. Over a module's flat buffers (every parameter decays) or over
// tensors or groups.
class Adam : public FlatOptimizer {
 public:
  Adam(FlatParameters& params, const AdamConfig& config);
  Adam(Module& module, const AdamConfig& config) : Adam(module.flat_parameters(), config) {}
  Adam(std::vector<Tensor> params, const AdamConfig& config);
  Adam(std::vector<ParamGroup> groups, const AdamConfig& config);
  using Optimizer::step;
  void step() override;
  std::string name() const override { return "Adam"; }
  std::vector<NamedTensor> element_state() override;             // "exp_avg", "exp_avg_sq"
  std::map<std::string, int64_t> scalar_state() const override;  // "step"
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  int64_t steps_taken() const { return adam_.steps; }
  const AdamConfig& config() const { return config_; }

 protected:
  void reset_state() override;

 private:
  AdamConfig config_;
  std::vector<bool> slot_decays_;  // flat path: every slot
  detail::AdamMoments adam_;
};

struct SGDConfig {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0, as torch
};

// torch.optim.SGD: d = g + wd·p; buf = d on the first step, then momentum·buf + (1 − dampening)·d;
// d = d + momentum·buf (Nesterov) or buf; p −= lr·d. Over a module's flat buffers or over tensors.
// torch.optim.SGD's update of n elements (a flat buffer's shard, a tensor or a chunk of one):
//   d = g + weight_decay·p
//   with momentum: buf = d on the first step, else momentum·buf + (1 − dampening)·d;
//                  d = d + momentum·buf (Nesterov) or d = buf
//   p = p − lr·d
// p, g, momentum_buffer [n] (momentum_buffer is null without momentum); the buffers do not
// overlap. Called once per step (per chunk over tensors), never per element.
void sgd_update(float* p, const float* g, float* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first);
void sgd_update(double* p, const double* g, double* momentum_buffer, int64_t n,
                const SGDConfig& config, double lr, double weight_decay, bool first);

class SGD : public FlatOptimizer {
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
  using Optimizer::step;
  void step() override;
  std::string name() const override { return "SGD"; }
  // "momentum_buffer" (none without momentum); the scalar "step".
  std::vector<NamedTensor> element_state() override;
  std::map<std::string, int64_t> scalar_state() const override;
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  Tensor& momentum_buffer() { return buf_; }  // the flat path's
  const SGDConfig& config() const { return config_; }

 protected:
  void reset_state() override;

 private:
  SGDConfig config_;
  Tensor buf_;
  int64_t steps_ = 0;            // flat path: steps taken (the first sets buf = d)
  std::vector<Tensor> buffers_;  // over tensors: per parameter, undefined until its first step
};

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
// gradient is skipped, as in torch).
class RMSprop : public FlatOptimizer {
 public:
  RMSprop(FlatParameters& params, const RMSpropConfig& config);
  RMSprop(Module& module, const RMSpropConfig& config)
      : RMSprop(module.flat_parameters(), config) {}
  RMSprop(std::vector<Tensor> params, const RMSpropConfig& config);
  RMSprop(std::vector<ParamGroup> groups, const RMSpropConfig& config);
  using Optimizer::step;
  void step() override;
  std::string name() const override { return "RMSprop"; }
  // "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered); the scalar "step".
  std::vector<NamedTensor> element_state() override;
  std::map<std::string, int64_t> scalar_state() const override { return {{"step", flat_.steps}}; }
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  const RMSpropConfig& config() const { return config_; }

 protected:
  void reset_state() override;

 private:
  struct State {
    Tensor square_avg, momentum_buffer, grad_avg;  // the last two only when the config uses them
    int64_t steps = 0;
  };
  State fresh_state(const Shape& shape, DType dtype) const;
  // Elements [offset, offset + state's size) of `values` from `gradients` (one group).
  void update(State& state, const Tensor& values, const Tensor& gradients, int64_t offset,
              double lr, double weight_decay) const;
  // Elements [begin, end) only; state element i is values' element origin + i (a group's run).
  void update_range(State& state, const Tensor& values, const Tensor& gradients, int64_t origin,
                    int64_t begin, int64_t end, double lr, double weight_decay) const;
  RMSpropConfig config_;
  State flat_;                       // the flat path's, over [shard_begin, shard_end)
  std::vector<State> tensor_state_;  // over tensors: per parameter, undefined until its first step
};

// torch.optim.Adagrad's settings (its defaults).
struct AdagradConfig {
  double lr = 1e-2;
  double lr_decay = 0;  // the rate at step t (from 1) is lr / (1 + (t − 1)·lr_decay)
  double weight_decay = 0;
  double initial_accumulator_value = 0;  // the sum of squares starts here
  double eps = 1e-10;
};

// torch.optim.Adagrad (dense gradients): g ← g + wd·p; s ← s + g²; p ← p − clr·g/(√s + eps) with
// clr = lr / (1 + (t − 1)·lr_decay), t the parameter's own step count. Over a module's flat
// buffers (one count) or over tensors or groups (a count per tensor; one without a gradient is
// skipped and its count stays). Sparse gradients do not exist here.
class Adagrad : public FlatOptimizer {
 public:
  Adagrad(FlatParameters& params, const AdagradConfig& config);
  Adagrad(Module& module, const AdagradConfig& config)
      : Adagrad(module.flat_parameters(), config) {}
  Adagrad(std::vector<Tensor> params, const AdagradConfig& config);
  Adagrad(std::vector<ParamGroup> groups, const AdagradConfig& config);
  using Optimizer::step;
  void step() override;
  std::string name() const override { return "Adagrad"; }
  std::vector<NamedTensor> element_state() override { return {{"sum", flat_.sum}}; }
  std::map<std::string, int64_t> scalar_state() const override { return {{"step", flat_.steps}}; }
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  const AdagradConfig& config() const { return config_; }

 protected:
  void reset_state() override;

 private:
  struct State {
    Tensor sum;
    int64_t steps = 0;
  };
  // Elements [offset, offset + state's size) of `values` from `gradients` (one group).
  void update(State& state, const Tensor& values, const Tensor& gradients, int64_t offset,
              double lr, double weight_decay) const;
  // Elements [begin, end) only; state element i is values' element origin + i (a group's run).
  void update_range(State& state, const Tensor& values, const Tensor& gradients, int64_t origin,
                    int64_t begin, int64_t end, double lr, double weight_decay) const;
  AdagradConfig config_;
  State flat_;
  std::vector<State> tensor_state_;
};

// torch.nn.utils.clip_grad_norm_: total = ‖all gradients‖₂; every gradient is multiplied by
// min(1, max_norm / (total + 1e-6)). Returns the pre-clip total norm.
struct ClipResult {
  double total_norm = 0;
  bool clipped = false;  // total_norm > max_norm
};
ClipResult clip_grad_norm(FlatParameters& params, double max_norm);
inline ClipResult clip_grad_norm(Module& module, double max_norm) {
  return clip_grad_norm(module.flat_parameters(), max_norm);
}
// The same over any tensors (a tensor without a gradient is skipped; one listed twice counts
// once): the flat overload's bits on the same parameters. Throws naming a gradient that is not
// contiguous or not floating point, and a max_norm that is negative or not finite.
ClipResult clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// clip_grad_norm in parts, for gradients spread over processes (train/data_parallel.h): the
// flat gradient is cut into blocks (each slot into runs of at most 8192 elements); a block's sum
// of squares depends only on its elements, and the total norm only on the block sums in order, so
// any owner of a block computes the same bits, and clip_grad_norm is these three calls.
struct GradientNormBlocks {
  std::vector<int64_t> begin, end;       // element range of each block, in flat order
  std::vector<size_t> slot_first_block;  // per slot its first block; one past the last at the end
};
GradientNormBlocks gradient_norm_blocks(const FlatParameters& params);
// Σ g² over gradient elements [begin, end) in double, in a fixed order (one block's sum).
double gradient_sum_of_squares(const FlatParameters& params, int64_t begin, int64_t end);
// The total norm from every block's sum (torch's order: per-parameter norms, then their norm).
double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
                                  const double* block_sums);
// Multiplies gradient elements [begin, end) by min(1, max_norm / (total_norm + 1e-6)).
ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end);

// Learning-rate schedules.
struct Schedule {
  enum class Kind { constant, warmup_cosine };
  Kind kind = Kind::constant;
  double lr = 6e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;      // cosine decays to lr·min_lr_ratio
  double at(int64_t step) const;  // step counted from 0
  static Schedule parse(const std::string& kind, double lr, int64_t warmup, int64_t total);
};
Schedule::Kind parse_schedule_kind(const std::string& text);  // "constant" | "cosine"
const char* schedule_kind_name(Schedule::Kind kind);

// A learning-rate schedule as an object that sets an optimiser's rates, as
// torch.optim.lr_scheduler: made after the optimiser, it remembers each group's rate as that
// group's base and sets step 0's rates at once; each step() after optimizer.step() moves to the
// next step's rates. The rule maps (step from 0, base rate) to a rate. The optimiser must outlive
// the schedule (it is not owned). A schedule whose rates are not a function of the step
// (ReduceLROnPlateau) has no rule: step() only counts, and its own state() is what a checkpoint
// keeps.
class LrScheduler {
 public:
  using Rule = std::function<double(int64_t step, double base_lr)>;
  LrScheduler(Optimizer& optimizer, Rule rule);
  virtual ~LrScheduler() = default;
  // Moves to the next step's rates; on a rule that refuses the step (OneCycleLR past its last)
  // it throws and nothing changes.
  void step();
  int64_t last_step() const { return step_; }  // the step whose rates are set
  // Moves to `step`'s rates (a resumed run: the Trainer sets its step, so the position is
  // recomputed rather than stored).
  void set_step(int64_t step);
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  double lr_at(int64_t step, size_t group = 0) const;  // refused without a rule
  // The rule at `step` for a group whose base rate is `base` (SequentialLR runs its schedules'
  // rules on its own bases); refused without a rule.
  double rate(int64_t step, double base) const;
  bool has_rule() const { return static_cast<bool>(rule_); }
  // torch's get_last_lr(): every group's rate as the last step (or the construction) set it.
  std::vector<double> get_last_lr() const;
  // State beyond the step, by name, for the Trainer's checkpoints (metadata
  // "depthgrad.scheduler.<name>", restored after set_step): empty for a rule of the step.
  // load_state checks every value before it changes anything; the default refuses any state.
  virtual std::map<std::string, double> state() const { return {}; }
  virtual void load_state(const std::map<std::string, double>& state);

 protected:
  explicit LrScheduler(Optimizer& optimizer);  // no rule: the subclass sets the rates itself
  // With the bases given instead of read from the optimiser's rates (SequentialLR: its
  // schedules, made before it, have already moved the rates; torch keeps them as initial_lr).
  LrScheduler(Optimizer& optimizer, Rule rule, std::vector<double> base_lrs);

 public:
  Optimizer& optimizer() const { return *optimizer_; }  // the one whose rates it sets

 private:
  void apply(int64_t step);
  Optimizer* optimizer_;  // not owned
  Rule rule_;
  std::vector<double> base_lrs_;
  int64_t step_ = 0;
};
// base · gamma^⌊step / step_size⌋ (torch StepLR).
struct StepLR : LrScheduler {
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
};
// Linear warm-up base·(step + 1)/warmup for the first warmup steps, then cosine from base down to
// base·min_lr_ratio at total_steps, flat after (Schedule's warmup_cosine, per group). Without
// warm-up: torch CosineAnnealingLR's closed form with T_max = total_steps, eta_min =
// base·min_lr_ratio (torch's step() uses a recursive form that rounds differently).
struct CosineAnnealingLR : LrScheduler {
  CosineAnnealingLR(Optimizer& optimizer, int64_t total_steps, int64_t warmup_steps = 0,
                    double min_lr_ratio = 0.0);
  // torch's CosineAnnealingLR(opt, T_max, eta_min) would put eta_min into warmup_steps here, as
  // an integer: refused at compile time. The floor is min_lr_ratio, a fraction of each base rate.
  template <std::floating_point F>
  CosineAnnealingLR(Optimizer& optimizer, int64_t total_steps, F eta_min) = delete;
};
// base·(step + 1)/warmup_steps for the first warmup_steps, then base (torch LinearLR with
// start_factor 1/warmup_steps, total_iters warmup_steps − 1).
struct LinearWarmupLR : LrScheduler {
  LinearWarmupLR(Optimizer& optimizer, int64_t warmup_steps);
};
// base · factor(step) (torch LambdaLR).
struct LambdaLR : LrScheduler {
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t step)> factor);
};

// The schedules below give torch 1.13's step() rates bit for bit: torch computes them with a
// chainable recurrence (each step multiplies the group's last rate by a factor), not a closed
// form, and so do these: the rate at step s is ((base·f(0))·f(1))···f(s), replayed from step 0 on
// a resume (set_step) and carried forward one multiplication per step() otherwise. Unlike torch,
// the factor multiplies this schedule's own last rate, not the optimiser's current one: two
// schedules stepped on one optimiser do not compound (torch's "chaining"); the last one stepped
// sets the rates. Compose them with SequentialLR, or one LambdaLR of the product.

// torch MultiStepLR: the rate is multiplied by gamma at each milestone (a milestone listed k
// times multiplies by gamma^k, as torch's Counter does). Milestones may come in any order; a
// negative one is refused.
struct MultiStepLR : LrScheduler {
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
};
// torch ExponentialLR: the rate is multiplied by gamma at every step (step s: base·gamma·…·gamma,
// s multiplications, as torch; base·gamma^s differs in the last bits).
struct ExponentialLR : LrScheduler {
  ExponentialLR(Optimizer& optimizer, double gamma);
};
// torch LinearLR: the factor goes linearly from start_factor (step 0) to end_factor (step
// total_iters and after), by torch's recurrence. start_factor in (0, 1], end_factor in [0, 1],
// total_iters >= 1, as torch checks. LinearWarmupLR(opt, w) is the closed form of the case
// LinearLR(opt, 1/w, 1, w − 1).
struct LinearLR : LrScheduler {
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);
};
// torch SequentialLR: schedulers[0] until milestones[0], then schedulers[1] restarted at its step
// 0, and so on (milestones.size() == schedulers.size() − 1, increasing; torch does not check the
// order). Each schedule runs on the optimiser's rates from before the first was made (torch's
// initial_lr), whatever their constructors set. The schedules are rules here: step this one, not
// them; they must be over `optimizer`, have a rule of the step (not ReduceLROnPlateau) and outlive
// it (not owned). Its state in a checkpoint is its step, like any rule of the step.
//   dg::LinearLR warm(opt, 0.5, 1.0, 4);
//   dg::ExponentialLR decay(opt, 0.9);
//   dg::SequentialLR schedule(opt, {&warm, &decay}, {2});
class SequentialLR : public LrScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<LrScheduler*> schedulers,
               std::vector<int64_t> milestones);
};
// torch OneCycleLR's settings. max_lr holds one rate per parameter group, or one for all. The
// length is total_steps, or (when that is 0) epochs × steps_per_epoch.
struct OneCycleConfig {
  enum class Anneal { cos, linear };
  std::vector<double> max_lr = {};
  int64_t total_steps = 0;
  int64_t epochs = 0, steps_per_epoch = 0;
  double pct_start = 0.3;  // the fraction of the steps spent rising
  Anneal anneal_strategy = Anneal::cos;
  // torch's default, true, also cycles SGD's momentum or Adam's beta1 between 0.85 and 0.95;
  // depthgrad's optimisers keep one momentum for all groups and steps, so true is refused.
  bool cycle_momentum = false;
  double div_factor = 25;         // initial rate = max_lr / div_factor
  double final_div_factor = 1e4;  // final rate = initial rate / final_div_factor
  bool three_phase = false;       // rise, fall back to the initial rate, then fall to the final
};
// torch OneCycleLR: from max_lr/div_factor up to max_lr over the first pct_start of the steps,
// then down to the final rate (three_phase: back to the initial rate over as many steps, then
// down to the final rate), each phase a cosine or linear anneal. Step total_steps is the last
// (torch extrapolates the last phase one step past its end there, and so does this; a linear
// anneal then goes below zero, which is set as 0: no optimizer step uses that rate in a run of
// total_steps steps). Stepping past it throws, as torch does. A phase of zero length (torch
// divides by zero at it) is refused when made. The group's own rate is not read: max_lr sets
// it, and base_lrs() holds max_lr.
struct OneCycleLR : LrScheduler {
  OneCycleLR(Optimizer& optimizer, const OneCycleConfig& config);
};

// torch ReduceLROnPlateau's settings. min_lr holds one floor per parameter group, or one for all
// (empty: 0).
struct PlateauConfig {
  enum class Mode { min, max };  // whether a smaller or a larger metric is better
  enum class Threshold { rel, abs };
  Mode mode = Mode::min;
  double factor = 0.1;    // new rate = max(rate·factor, min_lr); in [0, 1)
  int64_t patience = 10;  // evaluations without improvement tolerated before a cut
  double threshold = 1e-4;
  // rel: better means below best·(1 − threshold) (max: above best·(1 + threshold)); abs: below
  // best − threshold (max: above best + threshold).
  Threshold threshold_mode = Threshold::rel;
  int64_t cooldown = 0;  // evaluations after a cut during which bad ones are not counted
  std::vector<double> min_lr = {};
  double eps = 1e-8;  // a cut smaller than this is not made
};
// torch ReduceLROnPlateau: step(metric) after each evaluation cuts every group's rate by
// `factor` once the metric has not improved on the best so far for more than `patience`
// evaluations (not counting `cooldown` evaluations after a cut). The per-optimizer-step step()
// that the Trainer calls only counts: the rates follow the metric, so the state (best,
// num_bad_epochs, cooldown_counter, last_epoch and each group's rate "lr.<group>") is saved in the
// Trainer's checkpoints. It starts from the optimiser's current rates. Unlike torch, a NaN metric
// is refused (torch counts it as a bad evaluation), as are a negative threshold and, in min mode
// with rel, a threshold of 1 or more (torch's best·(1 − threshold) is then NaN or never beaten).
class ReduceLROnPlateau : public LrScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const PlateauConfig& config = {});
  using LrScheduler::step;
  void step(double metric);  // one evaluation's metric (torch's step(metrics))
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t last_epoch() const { return last_epoch_; }  // evaluations so far
  std::map<std::string, double> state() const override;
  void load_state(const std::map<std::string, double>& state) override;

 private:
  bool is_better(double metric) const;
  PlateauConfig config_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

// The CLI's Schedule driving an optimiser: a group whose base is schedule.lr gets schedule.at(step)
// exactly; another group is scaled by its base / schedule.lr.
struct ScheduleLR : LrScheduler {
  ScheduleLR(Optimizer& optimizer, const Schedule& schedule);
};

}  // namespace dg
