// Learning-rate schedules (see schedule.h): Schedule::at, LrScheduler and the torch schedules.
#include "train/optim/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "tensor/exercise.h"

namespace dg {

using detail::check_rate;

DG_EXERCISE double Schedule::at(int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine);
}

Schedule::Kind parse_schedule_kind(const std::string& text) {
  if (text == "constant") return Schedule::Kind::constant;
  if (text == "cosine" || text == "warmup_cosine") return Schedule::Kind::warmup_cosine;
  throw std::invalid_argument(
      fmt::format("unknown schedule '{}' (expected constant or cosine)", text));
}
const char* schedule_kind_name(Schedule::Kind kind) {
  return kind == Schedule::Kind::constant ? "constant" : "cosine";
}

Schedule Schedule::parse(const std::string& kind, double lr, int64_t warmup, int64_t total) {
  Schedule s;
  s.lr = lr;
  s.warmup_steps = warmup;
  s.total_steps = total;
  s.kind = parse_schedule_kind(kind);
  if (lr <= 0 || !std::isfinite(lr))
    throw std::invalid_argument(fmt::format("learning rate must be positive, got {}", lr));
  if (warmup < 0 || total < 1)
    throw std::invalid_argument("schedule: warmup must be >= 0 and total steps >= 1");
  return s;
}

// ---- schedules as objects

LrScheduler::LrScheduler(Optimizer& optimizer, Rule rule) : LrScheduler(optimizer) {
  if (!rule) throw std::invalid_argument("LrScheduler: no rule");
  rule_ = std::move(rule);
  apply(0);
}

LrScheduler::LrScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (size_t g = 0; g < optimizer.param_groups().size(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

LrScheduler::LrScheduler(Optimizer& optimizer, Rule rule, std::vector<double> base_lrs)
    : optimizer_(&optimizer), rule_(std::move(rule)), base_lrs_(std::move(base_lrs)) {
  if (!rule_) throw std::invalid_argument("LrScheduler: no rule");
  if (base_lrs_.size() != optimizer.param_groups().size())
    throw std::invalid_argument(
        fmt::format("LrScheduler: {} base rates for an optimiser of {} parameter groups",
                    base_lrs_.size(), optimizer.param_groups().size()));
  apply(0);
}

double LrScheduler::rate(int64_t step, double base) const {
  if (!rule_)
    throw std::invalid_argument(
        "learning-rate schedule: this one's rates follow a metric, not the step (it has no rule "
        "of the step)");
  return rule_(step, base);
}

std::vector<double> LrScheduler::get_last_lr() const {
  std::vector<double> rates;
  for (size_t g = 0; g < optimizer_->param_groups().size(); ++g) rates.push_back(optimizer_->lr(g));
  return rates;
}

void LrScheduler::step() {
  apply(step_ + 1);
  ++step_;
}

void LrScheduler::set_step(int64_t step) {
  if (step < 0)
    throw std::invalid_argument(fmt::format("learning-rate schedule: step {} is negative", step));
  apply(step);
  step_ = step;
}

double LrScheduler::lr_at(int64_t step, size_t group) const {
  if (!rule_)
    throw std::invalid_argument(
        "learning-rate schedule: this one's rates follow a metric, not the step (lr_at needs a "
        "rule of the step)");
  return rule_(step, base_lrs_.at(group));
}

void LrScheduler::load_state(const std::map<std::string, double>& state) {
  if (!state.empty())
    throw std::invalid_argument(fmt::format(
        "learning-rate schedule: this schedule is a rule of the step and keeps no state, but "
        "'{}' was given (state of a ReduceLROnPlateau?)",
        state.begin()->first));
}

// Every group's rate at `step`, all computed (and checked) before any is set.
void LrScheduler::apply(int64_t step) {
  if (!rule_) return;
  std::vector<double> rates;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double lr = rule_(step, base_lrs_[g]);
    if (!(lr >= 0) || !std::isfinite(lr))
      throw std::invalid_argument(
          fmt::format("learning-rate schedule: step {} gives group {} the rate {}", step, g, lr));
    rates.push_back(lr);
  }
  for (size_t g = 0; g < rates.size(); ++g) optimizer_->set_lr(g, rates[g]);
}

namespace {
void check_steps(int64_t value, int64_t least, const char* who, const char* what) {
  if (value < least)
    throw std::invalid_argument(
        fmt::format("{}: {} must be >= {}, got {}", who, what, least, value));
}
}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LrScheduler(optimizer, [step_size, gamma](int64_t step, double base) {
        check_steps(step_size, 1, "StepLR", "step_size");
        return base * std::pow(gamma, static_cast<double>(step / step_size));
      }) {}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t total_steps,
                                     int64_t warmup_steps, double min_lr_ratio)
    : LrScheduler(optimizer, [=](int64_t step, double base) {
        check_steps(total_steps, 1, "CosineAnnealingLR", "total_steps");
        check_steps(warmup_steps, 0, "CosineAnnealingLR", "warmup_steps");
        Schedule s;
        s.kind = Schedule::Kind::warmup_cosine;
        s.lr = base;
        s.warmup_steps = warmup_steps;
        s.total_steps = total_steps;
        s.min_lr_ratio = min_lr_ratio;
        return s.at(step);
      }) {}

LinearWarmupLR::LinearWarmupLR(Optimizer& optimizer, int64_t warmup_steps)
    : LrScheduler(optimizer, [warmup_steps](int64_t step, double base) {
        check_steps(warmup_steps, 1, "LinearWarmupLR", "warmup_steps");
        if (step >= warmup_steps) return base;
        return base * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
      }) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> factor)
    : LrScheduler(optimizer, [factor = std::move(factor)](int64_t step, double base) {
        return base * factor(step);
      }) {}

// ---- torch's chainable schedules: MultiStepLR, ExponentialLR, LinearLR; SequentialLR

namespace {
// A rule replaying torch's recurrence rate(s) = rate(s − 1)·factor(s), rate(−1) = base, in
// torch's order of multiplications. The last rate reached for each base is kept, so the steps of
// a run cost one multiplication each; a step before it (a resume, lr_at) replays from step 0.
LrScheduler::Rule chained(std::function<double(int64_t step)> factor) {
  struct Reached {
    int64_t step;
    double rate;
  };
  auto reached = std::make_shared<std::map<double, Reached>>();
  return [factor = std::move(factor), reached](int64_t step, double base) {
    auto it = reached->find(base);
    Reached r = it != reached->end() && it->second.step <= step ? it->second : Reached{-1, base};
    while (r.step < step) {
      ++r.step;
      r.rate = r.rate * factor(r.step);
    }
    (*reached)[base] = r;
    return r.rate;
  };
}

void check_factor(double value, double low, bool low_open, const char* who, const char* what) {
  if (!(low_open ? value > low : value >= low) || !(value <= 1.0))
    throw std::invalid_argument(fmt::format("{}: {} must be in {}{}, 1], got {}", who, what,
                                            low_open ? "(" : "[", low, value));
}
}  // namespace

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LrScheduler(optimizer, [&] {
        for (int64_t m : milestones)
          if (m < 0)
            throw std::invalid_argument(
                fmt::format("MultiStepLR: milestones must be >= 0, got {}", m));
        if (!std::isfinite(gamma))
          throw std::invalid_argument(
              fmt::format("MultiStepLR: gamma must be finite, got {}", gamma));
        return chained([milestones, gamma](int64_t step) {
          // torch: lr · gamma ** milestones[step], the Counter's count of this step
          const auto count = std::count(milestones.begin(), milestones.end(), step);
          return count == 0 ? 1.0 : std::pow(gamma, static_cast<double>(count));
        });
      }()) {}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LrScheduler(optimizer, [&] {
        if (!std::isfinite(gamma))
          throw std::invalid_argument(
              fmt::format("ExponentialLR: gamma must be finite, got {}", gamma));
        return chained([gamma](int64_t step) { return step == 0 ? 1.0 : gamma; });
      }()) {}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LrScheduler(optimizer, [&] {
        // torch: "Starting multiplicative factor expected to be greater than 0 and less or equal
        // to 1." and "Ending multiplicative factor expected to be between 0 and 1."
        check_factor(start_factor, 0.0, true, "LinearLR", "start_factor");
        check_factor(end_factor, 0.0, false, "LinearLR", "end_factor");
        check_steps(total_iters, 1, "LinearLR", "total_iters");
        const double s = start_factor, e = end_factor, n = static_cast<double>(total_iters);
        return chained([s, e, n, total_iters](int64_t step) {
          if (step == 0) return s;
          if (step > total_iters) return 1.0;
          return 1. + (e - s) / (n * s + static_cast<double>(step - 1) * (e - s));
        });
      }()) {}

namespace {
std::vector<double> sequential_bases(Optimizer& optimizer,
                                     const std::vector<LrScheduler*>& schedulers,
                                     const std::vector<int64_t>& milestones) {
  constexpr const char* who = "SequentialLR";
  if (schedulers.empty()) throw std::invalid_argument("SequentialLR: no schedulers given");
  // torch's message: "Sequential Schedulers expects number of schedulers provided to be one more
  // than the number of milestone points"
  if (milestones.size() != schedulers.size() - 1)
    throw std::invalid_argument(fmt::format(
        "SequentialLR: expects one more scheduler than milestones, got {} schedulers and {} "
        "milestones",
        schedulers.size(), milestones.size()));
  for (size_t i = 0; i < schedulers.size(); ++i) {
    if (!schedulers[i])
      throw std::invalid_argument(fmt::format("{}: scheduler {} is null", who, i));
    if (&schedulers[i]->optimizer() != &optimizer)
      throw std::invalid_argument(fmt::format(
          "{}: expects all schedulers to belong to the same optimizer, but scheduler {} is over "
          "another one",
          who, i));
    if (!schedulers[i]->has_rule())
      throw std::invalid_argument(fmt::format(
          "{}: scheduler {} follows a metric (ReduceLROnPlateau), not the step", who, i));
  }
  for (size_t i = 0; i < milestones.size(); ++i)
    if (milestones[i] < 1 || (i > 0 && milestones[i] <= milestones[i - 1]))
      throw std::invalid_argument(
          fmt::format("{}: milestones must be increasing and >= 1, got {} at position {}", who,
                      milestones[i], i));
  return schedulers[0]->base_lrs();
}
}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LrScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : LrScheduler(
          optimizer,
          [schedulers, milestones](int64_t step, double base) {
            // torch: bisect_right(milestones, step) picks the schedule; at its milestone it is
            // restarted at step 0 (step(0)), so it runs on the steps since the milestone.
            const size_t i = static_cast<size_t>(
                std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin());
            return schedulers[i]->rate(i == 0 ? step : step - milestones[i - 1], base);
          },
          sequential_bases(optimizer, schedulers, milestones)) {}

ScheduleLR::ScheduleLR(Optimizer& optimizer, const Schedule& schedule)
    : LrScheduler(optimizer, [schedule](int64_t step, double base) {
        const double lr = schedule.at(step);
        return base == schedule.lr ? lr : base * (lr / schedule.lr);
      }) {}

// ---- OneCycleLR

namespace {
// A per-group list of `what`: one value for every group, or one per group.
std::vector<double> per_group(const std::vector<double>& values, size_t groups, const char* who,
                              const char* what) {
  if (values.size() == 1) return std::vector<double>(groups, values[0]);
  if (values.size() != groups)
    throw std::invalid_argument(
        fmt::format("{}: expected 1 or {} values of {} (one per group), got {}", who, groups, what,
                    values.size()));
  return values;
}

struct CyclePhase {
  double end_step;
  double start_factor, end_factor;  // of max_lr
};

// a·b rounded, never fused into a following add: torch's phase ends are float(pct·total) − 1, and
// a fused multiply-add would move an end that torch puts on a step (or on the phase's start).
[[gnu::noinline]] double rounded_product(double a, double b) { return a * b; }

// torch's phases: the step each ends at and the rates it anneals between, as factors of max_lr.
std::vector<CyclePhase> one_cycle_phases(const OneCycleConfig& c, int64_t total) {
  const double initial = 1.0 / c.div_factor, final = initial / c.final_div_factor;
  const double rise_end = rounded_product(c.pct_start, static_cast<double>(total)) - 1;
  const double last = static_cast<double>(total - 1);
  if (!c.three_phase) return {{rise_end, initial, 1.0}, {last, 1.0, final}};
  return {{rise_end, initial, 1.0},
          {rounded_product(2 * c.pct_start, static_cast<double>(total)) - 2, 1.0, initial},
          {last, initial, final}};
}

void check_one_cycle(const OneCycleConfig& c, int64_t total) {
  constexpr const char* who = "OneCycleLR";
  if (c.total_steps != 0) check_steps(c.total_steps, 1, who, "total_steps");
  if (c.total_steps == 0) {
    check_steps(c.epochs, 1, who, "epochs (total_steps is 0)");
    check_steps(c.steps_per_epoch, 1, who, "steps_per_epoch (total_steps is 0)");
  }
  if (c.cycle_momentum)
    throw std::invalid_argument(
        "OneCycleLR: cycle_momentum = true is not supported (depthgrad's optimisers keep one "
        "momentum or beta1 for all groups and steps); set it false, the rate still cycles");
  if (!(c.pct_start >= 0 && c.pct_start <= 1))
    throw std::invalid_argument(
        fmt::format("OneCycleLR: pct_start must be in [0, 1], got {}", c.pct_start));
  for (auto [value, what] :
       {std::pair{c.div_factor, "div_factor"}, std::pair{c.final_div_factor, "final_div_factor"}})
    if (!(value > 0) || !std::isfinite(value))
      throw std::invalid_argument(
          fmt::format("OneCycleLR: {} must be finite and > 0, got {}", what, value));
  double start = 0;
  for (const CyclePhase& phase : one_cycle_phases(c, total)) {
    if (phase.end_step == start)
      throw std::invalid_argument(fmt::format(
          "OneCycleLR: pct_start {} over {} steps gives a phase of no length ending at step {} "
          "(torch divides by zero there)",
          c.pct_start, total, phase.end_step));
    start = phase.end_step;
  }
}

double one_cycle_rate(const OneCycleConfig& c, int64_t total, int64_t step, double max_lr) {
  if (step > total)
    throw std::invalid_argument(fmt::format(
        "OneCycleLR: step {} is past total_steps {} (the schedule ends there; torch raises 'Tried "
        "to step {} times')",
        step, total, step + 1));
  const std::vector<CyclePhase> phases = one_cycle_phases(c, total);
  double start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const CyclePhase& phase = phases[i];
    if (static_cast<double>(step) <= phase.end_step || i + 1 == phases.size()) {
      const double pct = (static_cast<double>(step) - start) / (phase.end_step - start);
      const double from = max_lr * phase.start_factor, to = max_lr * phase.end_factor;
      const double rate = c.anneal_strategy == OneCycleConfig::Anneal::cos
                              ? to + (from - to) / 2.0 * (std::cos(M_PI * pct) + 1)
                              : (to - from) * pct + from;
      return std::max(0.0, rate);  // below 0 only past the end of a linear anneal (step total)
    }
    start = phase.end_step;
  }
  return 0;  // not reached: the last phase takes every step
}

int64_t one_cycle_total(const OneCycleConfig& c) {
  const int64_t total = c.total_steps != 0 ? c.total_steps : c.epochs * c.steps_per_epoch;
  check_one_cycle(c, total);
  return total;
}

// Sets each group's rate to its max_lr, so the schedule takes them as its bases; checks every
// setting first, so a refused schedule leaves the optimiser as it was.
Optimizer& with_max_lrs(Optimizer& optimizer, const OneCycleConfig& c) {
  one_cycle_total(c);
  const std::vector<double> max_lrs =
      per_group(c.max_lr, optimizer.param_groups().size(), "OneCycleLR", "max_lr");
  for (double max_lr : max_lrs) check_rate(max_lr, "OneCycleLR", "max_lr");
  for (size_t g = 0; g < max_lrs.size(); ++g) optimizer.set_lr(g, max_lrs[g]);
  return optimizer;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleConfig& config)
    : LrScheduler(with_max_lrs(optimizer, config),
                  [config, total = one_cycle_total(config)](int64_t step, double max_lr) {
                    return one_cycle_rate(config, total, step, max_lr);
                  }) {}

// ---- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const PlateauConfig& config)
    : LrScheduler(optimizer), config_(config) {
  constexpr const char* who = "ReduceLROnPlateau";
  if (!(config.factor >= 0 && config.factor < 1))
    throw std::invalid_argument(
        fmt::format("ReduceLROnPlateau: factor must be in [0, 1), got {}", config.factor));
  check_steps(config.patience, 0, who, "patience");
  check_steps(config.cooldown, 0, who, "cooldown");
  check_rate(config.threshold, who, "threshold");
  check_rate(config.eps, who, "eps");
  if (config.threshold_mode == PlateauConfig::Threshold::rel &&
      config.mode == PlateauConfig::Mode::min && config.threshold >= 1)
    throw std::invalid_argument(fmt::format(
        "ReduceLROnPlateau: a rel threshold in min mode must be < 1, got {}", config.threshold));
  const size_t groups = optimizer.param_groups().size();
  min_lrs_ = config.min_lr.empty() ? std::vector<double>(groups, 0.0)
                                   : per_group(config.min_lr, groups, who, "min_lr");
  for (double m : min_lrs_) check_rate(m, who, "min_lr");
  best_ = config.mode == PlateauConfig::Mode::min ? HUGE_VAL : -HUGE_VAL;  // torch's mode_worse
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = config_.threshold_mode == PlateauConfig::Threshold::rel;
  if (config_.mode == PlateauConfig::Mode::min)
    return rel ? a < best_ * (1. - config_.threshold) : a < best_ - config_.threshold;
  return rel ? a > best_ * (config_.threshold + 1.) : a > best_ + config_.threshold;
}

// torch 1.13's step(metrics), line for line.
void ReduceLROnPlateau::step(double metric) {
  if (std::isnan(metric))
    throw std::invalid_argument(
        "ReduceLROnPlateau: the metric is NaN (torch would count it as an evaluation without "
        "improvement; a NaN loss is a diverged run, not a plateau)");
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad evaluations in the cooldown are not counted
  }
  if (num_bad_epochs_ > config_.patience) {
    for (size_t g = 0; g < min_lrs_.size(); ++g) {
      const double old_lr = optimizer().lr(g);
      const double new_lr = std::max(old_lr * config_.factor, min_lrs_[g]);
      if (old_lr - new_lr > config_.eps) optimizer().set_lr(g, new_lr);
    }
    cooldown_counter_ = config_.cooldown;
    num_bad_epochs_ = 0;
  }
}

std::map<std::string, double> ReduceLROnPlateau::state() const {
  std::map<std::string, double> state{{"best", best_},
                                      {"num_bad_epochs", static_cast<double>(num_bad_epochs_)},
                                      {"cooldown_counter", static_cast<double>(cooldown_counter_)},
                                      {"last_epoch", static_cast<double>(last_epoch_)}};
  for (size_t g = 0; g < min_lrs_.size(); ++g) state[fmt::format("lr.{}", g)] = optimizer().lr(g);
  return state;
}

void ReduceLROnPlateau::load_state(const std::map<std::string, double>& state) {
  const std::map<std::string, double> mine = this->state();
  for (const auto& [key, value] : state)
    if (!mine.count(key))
      throw std::invalid_argument(fmt::format(
          "ReduceLROnPlateau: unknown state '{}' (another schedule's, or another number of "
          "parameter groups)",
          key));
  for (const auto& [key, value] : mine) {
    auto it = state.find(key);
    if (it == state.end())
      throw std::invalid_argument(fmt::format("ReduceLROnPlateau: state '{}' is missing", key));
    const double v = it->second;
    const bool count = key == "num_bad_epochs" || key == "cooldown_counter" || key == "last_epoch";
    const bool ok = key == "best" ? !std::isnan(v)
                    : count       ? v >= 0 && v <= 9e15 && v == std::floor(v)
                                  : v >= 0 && std::isfinite(v);
    if (!ok)
      throw std::invalid_argument(
          fmt::format("ReduceLROnPlateau: state '{}' has the invalid value {}", key, v));
  }
  best_ = state.at("best");
  num_bad_epochs_ = static_cast<int64_t>(state.at("num_bad_epochs"));
  cooldown_counter_ = static_cast<int64_t>(state.at("cooldown_counter"));
  last_epoch_ = static_cast<int64_t>(state.at("last_epoch"));
  for (size_t g = 0; g < min_lrs_.size(); ++g)
    optimizer().set_lr(g, state.at(fmt::format("lr.{}", g)));
}

}  // namespace dg
