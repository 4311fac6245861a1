// Learning-rate schedules: Schedule, the CLI's rule of the step (constant, or linear warm-up then
// cosine), and LrScheduler, schedules as objects that set an optimiser's rates as
// torch.optim.lr_scheduler's do (StepLR, CosineAnnealingLR, MultiStepLR, ExponentialLR,
// LinearLR, SequentialLR, OneCycleLR, ReduceLROnPlateau, LambdaLR). A schedule sets rates,
// nothing else.
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "train/optim/optimizer.h"

namespace dg {

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
