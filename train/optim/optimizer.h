// What every optimiser is, and what a new one must provide. Three layers, each a class:
//   Optimizer             parameter groups (torch's param_groups: tensors sharing a rate and a
//                         weight decay), step(), zero_grad() and the rates a schedule sets;
//   FlatOptimizer         one the Trainer can drive: it updates a module's flat parameter buffer,
//                         or the shard of it ZeRO-1 gives this rank, and names its state for
//                         checkpoints (a user's own optimiser may implement step() itself);
//   ElementwiseOptimizer  one whose update of an element reads only that element's parameter,
//                         gradient and state (SGD, Adam, AdamW, RMSprop, Adagrad): it provides
//                         its state's names and ONE update over a span of elements, and this
//                         class runs it over tensors, groups, the flat buffer and ZeRO shards.
// A new optimiser goes in a file of its own beside sgd.h and derives from ElementwiseOptimizer
// when it can (train/README.md, "Write your own optimiser", shows one in full).
#pragma once
#include <array>
#include <cstdint>
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

// What every optimiser offers a training loop and a schedule (LrScheduler, schedule.h).
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

// What the Trainer (train/trainer.h) needs of an optimiser: it updates a module's flat parameter
// buffer, elements [shard_begin, shard_end) of it (all of them, or with ZeRO-1 this rank's
// shard), and its state is per-element tensors over that range plus integer scalars (step
// counts). The Trainer saves both in training checkpoints (tensor "optimizer.<state>.<parameter>",
// metadata "depthgrad.optimizer.<scalar>", the name as "depthgrad.optimizer"), and with ZeRO-1
// gathers the per-element state from the ranks' shards and hands each rank its part. A subclass
// implements name(), step() (Optimizer's), element_state(), reset_state() and, when it has any,
// the scalars; one whose per-element state cannot be cut over ranks says so in shardable(), and
// ZeRO-1 is refused naming it. ElementwiseOptimizer (below) implements all but name() for an
// optimiser that provides an update over a span.
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

  // Elements [begin, end) of the flat buffer that one group updates at its rate and weight decay.
  struct Run {
    int64_t begin = 0, end = 0;
    double lr = 0, weight_decay = 0;
  };

 protected:
  FlatOptimizer() = default;  // over tensors or groups: not one the Trainer can drive
  // Over `params` (not owned: the caller's, usually module.flat_parameters()), one group.
  FlatOptimizer(FlatParameters& params, double lr, double weight_decay, const char* who);
  // Allocates the per-element state for [shard_begin, shard_end), zeroed, and zeroes the scalars.
  virtual void reset_state() = 0;
  // This step's runs within [shard_begin, shard_end), one per parameter slot in flat order (a
  // slot in no group has none), each at its group's current rate; a slot with decays[s] false
  // gets weight decay 0 when the optimiser was made from the module (AdamW's DecayPolicy).
  std::vector<Run> runs(const std::vector<bool>& decays = {}) const;

  FlatParameters* params_ = nullptr;
  int64_t shard_begin_ = 0, shard_end_ = 0;
  int64_t tensor_steps_ = 0;  // steps taken over tensors (use_flat_buffer refuses after one)
  std::vector<size_t> slot_group_;
};

// n elements of one group for one step: the parameters p, their gradients g, and the
// optimiser's per-element state over the same elements (state[k] is the k-th of state_layout()).
template <class T>
struct UpdateSpan {
  static constexpr size_t kMaxStates = 4;
  T* p = nullptr;
  const T* g = nullptr;
  std::array<T*, kMaxStates> state = {};
  int64_t n = 0;
  double lr = 0, weight_decay = 0;  // the group's, at this step
  int64_t step = 0;  // updates of this state so far, this one included (1 on the first)
};

// An optimiser whose update of an element reads only that element's parameter, gradient and
// state. A subclass provides three things:
//   name()          its name in checkpoints and errors;
//   state_layout()  its per-element state tensors, by name, with each one's starting value;
//   update(span)    the update of one span, for float and for double (a template both call).
// This class runs update() over every span a step has, in one way for all of them: over a
// module's flat buffer (one group, or the groups use_flat_buffer moved there: a span per slot,
// ZeRO-1's shard cut out of it) and over tensors or groups (a span per tensor that has a
// gradient, with that tensor's own state and step count, as torch). Spans are cut into chunks
// updated on several threads at once, so update() must touch only its span's elements. The
// state is made when first needed (a step, element_state()), not when the optimiser is: the
// trainer shards an optimiser before its first step (ZeRO), so a rank never holds the whole
// buffer's state. Over a float32 flat buffer that keeps a bf16 copy (tensor/bf16_weights.h), the
// copy is written in the same pass.
class ElementwiseOptimizer : public FlatOptimizer {
 public:
  using Optimizer::step;
  void step() final;
  // The flat buffer's state tensors, by state_layout()'s names (made if not yet).
  std::vector<NamedTensor> element_state() override;
  std::map<std::string, int64_t> scalar_state() const override;  // "step"
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override;
  // Steps taken (over tensors: calls to step()).
  int64_t steps_taken() const { return params_ ? flat_.steps : tensor_steps_; }
  void set_steps_taken(int64_t step) { flat_.steps = step; }

 protected:
  struct StateTensor {
    std::string name;
    double initial = 0;  // every element's value before the first update
  };
  virtual std::vector<StateTensor> state_layout() const = 0;  // at most kMaxStates
  virtual void update(const UpdateSpan<float>& span) const = 0;
  virtual void update(const UpdateSpan<double>& span) const = 0;

  ElementwiseOptimizer(FlatParameters& params, double lr, double weight_decay, const char* who)
      : FlatOptimizer(params, lr, weight_decay, who) {
    reset_state();
  }
  ElementwiseOptimizer(std::vector<ParamGroup> groups, double lr, double weight_decay,
                       const char* who);
  void reset_state() override;
  // Made from the module: slots with decays[s] false take weight decay 0 (AdamW's DecayPolicy).
  void set_slot_decays(std::vector<bool> decays) { slot_decays_ = std::move(decays); }
  // State tensor k of the flat buffer (made if not yet; undefined over tensors), and of parameter
  // i over tensors (in group order; undefined before that parameter's first update).
  Tensor& flat_state(size_t k);
  const Tensor& tensor_state(size_t i, size_t k) const;

 private:
  struct State {
    std::vector<Tensor> tensors;  // state_layout()'s, in its order
    int64_t steps = 0;
  };
  State fresh_state(const Shape& shape, DType dtype) const;
  void make_flat_state();
  void step_flat();
  void step_tensors();
  State flat_;  // over [shard_begin, shard_end)
  bool flat_made_ = false;
  std::vector<State> per_tensor_;
  std::vector<bool> slot_decays_;
};

namespace detail {
// Throws std::invalid_argument "<who>: <what> must be finite and >= 0, got <value>".
void check_rate(double value, const char* who, const char* what);
// One group of `params` with the optimiser's rate and weight decay.
std::vector<ParamGroup> one_group(std::vector<Tensor> params);
}  // namespace detail

}  // namespace dg
