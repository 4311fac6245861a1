// OneCycleLR and ReduceLROnPlateau against torch 1.13 (goldens from tools/torch_goldens_optim.py):
// every group's rate at every step of a one-cycle (cos, linear, three phases, epochs ×
// steps_per_epoch) and the refusal past its last step; the plateau's cuts, counters and rates over
// scripted metric sequences (min and max, rel and abs, cooldown, min_lr per group); the state a
// checkpoint keeps, and the refusal of bad settings naming them. The Trainer's exact resume with
// a plateau schedule is in tests/test_trainer_optimizers.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "train/optim.h"

using namespace dg;

namespace {
// Printed by tools/torch_goldens_optim.py: the two groups' rates after each step, interleaved
// (group 0, group 1, group 0, ...); for the plateau also num_bad_epochs and cooldown_counter.
// kTorchOneCycleCos: Tried to step 12 times. The specified number of total steps is 10
const std::vector<double> kTorchOneCycleCos{0.0040000000000000036,
                                            0.020000000000000018,
                                            0.052000000000000005,
                                            0.26,
                                            0.1,
                                            0.5,
                                            0.09504846320134738,
                                            0.47524231600673683,
                                            0.0811745653949763,
                                            0.40587282697488153,
                                            0.06112620219362893,
                                            0.30563101096814466,
                                            0.03887419780637107,
                                            0.19437098903185537,
                                            0.0188258346050237,
                                            0.09412917302511849,
                                            0.004951936798652629,
                                            0.024759683993263143,
                                            4e-07,
                                            2e-06,
                                            0.004951936798652624,
                                            0.024759683993263115};
// kTorchOneCycleLinear: Tried to step 12 times. The specified number of total steps is 10
const std::vector<double> kTorchOneCycleLinear{0.004,
                                               0.02,
                                               0.052000000000000005,
                                               0.26,
                                               0.1,
                                               0.5,
                                               0.08571434285714286,
                                               0.4285717142857143,
                                               0.07142868571428572,
                                               0.35714342857142856,
                                               0.05714302857142858,
                                               0.28571514285714283,
                                               0.042857371428571434,
                                               0.21428685714285717,
                                               0.028571714285714284,
                                               0.14285857142857145,
                                               0.014286057142857148,
                                               0.07143028571428572,
                                               3.999999999976245e-07,
                                               2.000000000002e-06,
                                               -0.014285257142857138,
                                               -0.07142628571428566};
// kTorchOneCycleThreePhase: Tried to step 12 times. The specified number of total steps is 10
const std::vector<double> kTorchOneCycleThreePhase{0.0040000000000000036,
                                                   0.020000000000000018,
                                                   0.052000000000000005,
                                                   0.26,
                                                   0.1,
                                                   0.5,
                                                   0.052000000000000005,
                                                   0.26,
                                                   0.004,
                                                   0.02,
                                                   0.0036180721853510196,
                                                   0.0180903609267551,
                                                   0.0026181721853510195,
                                                   0.0130908609267551,
                                                   0.0013822278146489802,
                                                   0.0069111390732449025,
                                                   0.0003823278146489803,
                                                   0.0019116390732449018,
                                                   4e-07,
                                                   2e-06,
                                                   0.00038232781464897985,
                                                   0.0019116390732448996};
// kTorchOneCycleEpochs: Tried to step 14 times. The specified number of total steps is 12
const std::vector<double> kTorchOneCycleEpochs{0.02,
                                               0.02,
                                               0.11000000000000001,
                                               0.11000000000000001,
                                               0.2,
                                               0.2,
                                               0.11,
                                               0.11,
                                               0.01999999999999999,
                                               0.01999999999999999,
                                               0.017171428571428574,
                                               0.017171428571428574,
                                               0.014342857142857143,
                                               0.014342857142857143,
                                               0.011514285714285715,
                                               0.011514285714285715,
                                               0.008685714285714286,
                                               0.008685714285714286,
                                               0.005857142857142856,
                                               0.005857142857142856,
                                               0.003028571428571429,
                                               0.003028571428571429,
                                               0.0001999999999999988,
                                               0.0001999999999999988,
                                               -0.002628571428571428,
                                               -0.002628571428571428};
const std::vector<double> kTorchPlateauMinRel{1.0,
                                              0.5,
                                              1.0,
                                              0.5,
                                              1.0,
                                              0.5,
                                              1.0,
                                              0.5,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05};
const std::vector<int> kTorchPlateauMinRelBad{0, 0, 1, 2, 0, 0, 1, 0, 1, 2,
                                              0, 0, 1, 2, 0, 1, 2, 0, 1, 2};
const std::vector<int> kTorchPlateauMinRelCooldown{0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
const std::vector<double> kTorchPlateauMinAbs{1.0,
                                              0.5,
                                              1.0,
                                              0.5,
                                              1.0,
                                              0.5,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.1,
                                              0.05,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.010000000000000002,
                                              0.005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.0010000000000000002,
                                              0.0005000000000000001,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05,
                                              0.00010000000000000003,
                                              5.0000000000000016e-05};
const std::vector<int> kTorchPlateauMinAbsBad{0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                                              1, 0, 1, 0, 0, 0, 1, 0, 0, 0};
const std::vector<int> kTorchPlateauMinAbsCooldown{0, 0, 0, 2, 1, 0, 0, 2, 1, 0,
                                                   0, 0, 0, 2, 1, 0, 0, 2, 1, 0};
const std::vector<double> kTorchPlateauMaxRel{
    1.0, 0.5,  1.0,  0.5,   1.0,  0.5,   1.0,  0.5,   1.0,  0.5,   1.0,  0.5,  1.0, 0.5,
    1.0, 0.5,  1.0,  0.5,   1.0,  0.5,   1.0,  0.5,   0.5,  0.25,  0.5,  0.25, 0.5, 0.25,
    0.5, 0.25, 0.25, 0.125, 0.25, 0.125, 0.25, 0.125, 0.25, 0.125, 0.25, 0.125};
const std::vector<int> kTorchPlateauMaxRelBad{0, 0, 1, 2, 0, 0, 1, 2, 0, 1,
                                              2, 0, 0, 1, 2, 0, 1, 0, 1, 2};
const std::vector<int> kTorchPlateauMaxRelCooldown{0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
const std::vector<double> kTorchPlateauMaxAbsMinLr{
    1.0,  0.5, 1.0,  0.5, 0.3,  0.15, 0.3,  0.15, 0.09, 0.1, 0.09, 0.1, 0.05, 0.1,
    0.05, 0.1, 0.05, 0.1, 0.05, 0.1,  0.05, 0.1,  0.05, 0.1, 0.05, 0.1, 0.05, 0.1,
    0.05, 0.1, 0.05, 0.1, 0.05, 0.1,  0.05, 0.1,  0.05, 0.1, 0.05, 0.1};
const std::vector<int> kTorchPlateauMaxAbsMinLrBad{0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                   0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
const std::vector<int> kTorchPlateauMaxAbsMinLrCooldown{0, 0, 1, 0, 1, 0, 1, 0, 0, 1,
                                                        0, 1, 0, 1, 0, 1, 0, 0, 1, 0};

// SGD(lr = 1.0) over two one-element groups, as the generator's.
struct TwoGroups {
  Tensor a = Tensor::zeros({1}, DType::f64).set_requires_grad(true);
  Tensor b = Tensor::zeros({1}, DType::f64).set_requires_grad(true);
  SGD sgd{{{.params = {a}}, {.params = {b}}}, SGDConfig{.lr = 1.0}};
  std::vector<double> rates() const { return {sgd.lr(0), sgd.lr(1)}; }
};

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-13 * std::fabs(want[i]));  // relative, 0 exact
  }
}

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The rates of steps 0 .. total of a one-cycle, then the step past it must throw. torch's value
// at step total below zero (a linear anneal's extrapolation) is 0 here.
void check_one_cycle(const OneCycleConfig& config, int64_t total, std::vector<double> want) {
  TwoGroups t;
  OneCycleLR schedule(t.sgd, config);
  std::vector<double> got;
  for (int64_t step = 0; step <= total; ++step) {
    const std::vector<double> r = t.rates();
    got.insert(got.end(), r.begin(), r.end());
    if (step < total) schedule.step();
  }
  for (double& w : want) w = std::max(w, 0.0);
  check_close(got, want);
  CHECK(thrown([&] { schedule.step(); }).find("is past total_steps") != std::string::npos);
  CHECK(schedule.last_step() == total);  // a refused step changes nothing
  CHECK(t.rates() == std::vector<double>(got.end() - 2, got.end()));
}

struct PlateauCase {
  std::vector<double> rates;
  std::vector<int> bad, cooldown;
};

void check_plateau(const PlateauConfig& config, const std::vector<double>& metrics,
                   const PlateauCase& want) {
  TwoGroups t;
  t.sgd.set_lr(1, 0.5);
  ReduceLROnPlateau plateau(t.sgd, config);
  std::vector<double> rates;
  std::vector<int> bad, cooldown;
  for (double metric : metrics) {
    plateau.step(metric);
    rates.push_back(t.sgd.lr(0));
    rates.push_back(t.sgd.lr(1));
    bad.push_back(static_cast<int>(plateau.num_bad_epochs()));
    cooldown.push_back(static_cast<int>(plateau.cooldown_counter()));
  }
  check_close(rates, want.rates);
  CHECK(bad == want.bad);
  CHECK(cooldown == want.cooldown);
}

const std::vector<double> kFalling{1.0,  0.9, 0.95, 0.9,  0.91, 0.89, 0.8999, 0.85, 0.86, 0.87,
                                   0.88, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75,   0.76, 0.77, 0.78};
const std::vector<double> kRising{0.1, 0.2, 0.19, 0.2,  0.2001, 0.25, 0.24, 0.23, 0.3,  0.3,
                                  0.3, 0.3, 0.31, 0.29, 0.28,   0.27, 0.26, 0.4,  0.39, 0.38};
}  // namespace

TEST_CASE("OneCycleLR matches torch: cos, linear, three phases, epochs x steps_per_epoch") {
  using Anneal = OneCycleConfig::Anneal;
  check_one_cycle({.max_lr = {0.1, 0.5}, .total_steps = 10}, 10, kTorchOneCycleCos);
  check_one_cycle({.max_lr = {0.1, 0.5}, .total_steps = 10, .anneal_strategy = Anneal::linear}, 10,
                  kTorchOneCycleLinear);
  check_one_cycle({.max_lr = {0.1, 0.5}, .total_steps = 10, .three_phase = true}, 10,
                  kTorchOneCycleThreePhase);
  check_one_cycle({.max_lr = {0.2},
                   .epochs = 3,
                   .steps_per_epoch = 4,
                   .pct_start = 0.25,
                   .anneal_strategy = Anneal::linear,
                   .div_factor = 10,
                   .final_div_factor = 100,
                   .three_phase = true},
                  12, kTorchOneCycleEpochs);

  // A pure function of the step: set_step (a resume) lands on the same rates, and base_lrs are
  // the max_lrs.
  TwoGroups t, u;
  OneCycleLR a(t.sgd, {.max_lr = {0.1, 0.5}, .total_steps = 10});
  OneCycleLR b(u.sgd, {.max_lr = {0.1, 0.5}, .total_steps = 10});
  for (int i = 0; i < 7; ++i) a.step();
  b.set_step(7);
  CHECK(t.rates() == u.rates());
  CHECK(b.base_lrs() == std::vector<double>{0.1, 0.5});
  CHECK(b.lr_at(3, 1) == doctest::Approx(kTorchOneCycleCos[7]));
}

TEST_CASE("OneCycleLR refuses bad settings, naming them, and leaves the optimiser alone") {
  TwoGroups t;
  CHECK(thrown([&] { OneCycleLR(t.sgd, {.max_lr = {0.1}}); }) ==
        "OneCycleLR: epochs (total_steps is 0) must be >= 1, got 0");
  CHECK(thrown([&] { OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = -5}); }) ==
        "OneCycleLR: total_steps must be >= 1, got -5");
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1, 0.2, 0.3}, .total_steps = 10});
        }) == "OneCycleLR: expected 1 or 2 values of max_lr (one per group), got 3");
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1, -1.0}, .total_steps = 10});
        }) == "OneCycleLR: max_lr must be finite and >= 0, got -1");
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = 10, .pct_start = 1.5});
        }) == "OneCycleLR: pct_start must be in [0, 1], got 1.5");
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = 10, .pct_start = 0.1});
        }).find("gives a phase of no length") != std::string::npos);
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = 10, .pct_start = 1.0});
        }).find("gives a phase of no length ending at step 9") != std::string::npos);
  CHECK(thrown([&] {
          OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = 10, .cycle_momentum = true});
        }).find("cycle_momentum = true is not supported") != std::string::npos);
  CHECK(thrown([&] { OneCycleLR(t.sgd, {.max_lr = {0.1}, .total_steps = 10, .div_factor = 0}); }) ==
        "OneCycleLR: div_factor must be finite and > 0, got 0");
  CHECK(t.rates() == std::vector<double>{1.0, 1.0});
}

TEST_CASE("ReduceLROnPlateau matches torch: min and max, rel and abs, cooldown, min_lr") {
  using Mode = PlateauConfig::Mode;
  using Threshold = PlateauConfig::Threshold;
  check_plateau({.patience = 2}, kFalling,
                {kTorchPlateauMinRel, kTorchPlateauMinRelBad, kTorchPlateauMinRelCooldown});
  check_plateau({.patience = 1, .threshold = 0.05, .threshold_mode = Threshold::abs, .cooldown = 2},
                kFalling,
                {kTorchPlateauMinAbs, kTorchPlateauMinAbsBad, kTorchPlateauMinAbsCooldown});
  check_plateau({.mode = Mode::max, .factor = 0.5, .patience = 2}, kRising,
                {kTorchPlateauMaxRel, kTorchPlateauMaxRelBad, kTorchPlateauMaxRelCooldown});
  check_plateau(
      {.mode = Mode::max,
       .factor = 0.3,
       .patience = 0,
       .threshold = 0.02,
       .threshold_mode = Threshold::abs,
       .cooldown = 1,
       .min_lr = {0.05, 0.1},
       .eps = 0.01},
      kRising,
      {kTorchPlateauMaxAbsMinLr, kTorchPlateauMaxAbsMinLrBad, kTorchPlateauMaxAbsMinLrCooldown});
}

TEST_CASE("ReduceLROnPlateau: the optimizer-step step() only counts; its state round-trips") {
  TwoGroups t;
  ReduceLROnPlateau plateau(t.sgd, {.patience = 0, .cooldown = 3});
  CHECK(plateau.best() == HUGE_VAL);
  for (int i = 0; i < 5; ++i) plateau.step();
  CHECK(t.rates() == std::vector<double>{1.0, 1.0});
  CHECK(plateau.last_step() == 5);
  plateau.step(2.0);
  plateau.step(3.0);  // worse: cut
  CHECK(t.rates() == std::vector<double>{0.1, 0.1});
  const std::map<std::string, double> saved = plateau.state();
  CHECK(saved.at("best") == 2.0);
  CHECK(saved.at("cooldown_counter") == 3);
  CHECK(saved.at("last_epoch") == 2);
  CHECK(saved.at("lr.1") == 0.1);

  TwoGroups u;
  ReduceLROnPlateau restored(u.sgd, {.patience = 0, .cooldown = 3});
  restored.load_state(saved);
  CHECK(restored.state() == saved);
  CHECK(u.rates() == t.rates());
  for (double metric : {2.5, 1.0, 1.5, 1.2}) {
    plateau.step(metric);
    restored.step(metric);
  }
  CHECK(restored.state() == plateau.state());

  std::map<std::string, double> bad = saved;
  bad["num_bad_epochs"] = -1;
  CHECK(thrown([&] { restored.load_state(bad); }) ==
        "ReduceLROnPlateau: state 'num_bad_epochs' has the invalid value -1");
  bad = saved;
  bad.erase("lr.1");
  CHECK(thrown([&] { restored.load_state(bad); }) == "ReduceLROnPlateau: state 'lr.1' is missing");
  bad = saved;
  bad["lr.2"] = 0.1;
  CHECK(thrown([&] { restored.load_state(bad); }).find("unknown state 'lr.2'") !=
        std::string::npos);
  CHECK(restored.state() == plateau.state());  // nothing changed
  CHECK(thrown([&] { restored.lr_at(0); }).find("follow a metric") != std::string::npos);
  StepLR step_lr(u.sgd, 2);
  CHECK(thrown([&] { step_lr.load_state(saved); }).find("keeps no state") != std::string::npos);
}

TEST_CASE("ReduceLROnPlateau refuses bad settings and a NaN metric, naming them") {
  TwoGroups t;
  CHECK(thrown([&] { ReduceLROnPlateau(t.sgd, {.factor = 1.0}); }) ==
        "ReduceLROnPlateau: factor must be in [0, 1), got 1");
  CHECK(thrown([&] { ReduceLROnPlateau(t.sgd, {.patience = -1}); }) ==
        "ReduceLROnPlateau: patience must be >= 0, got -1");
  CHECK(thrown([&] { ReduceLROnPlateau(t.sgd, {.threshold = -0.1}); }) ==
        "ReduceLROnPlateau: threshold must be finite and >= 0, got -0.1");
  CHECK(thrown([&] { ReduceLROnPlateau(t.sgd, {.threshold = 1.0}); }) ==
        "ReduceLROnPlateau: a rel threshold in min mode must be < 1, got 1");
  CHECK(thrown([&] {
          ReduceLROnPlateau(t.sgd, {.min_lr = {0.1, 0.2, 0.3}});
        }) == "ReduceLROnPlateau: expected 1 or 2 values of min_lr (one per group), got 3");
  CHECK(thrown([&] { ReduceLROnPlateau(t.sgd, {.min_lr = {-0.1}}); }) ==
        "ReduceLROnPlateau: min_lr must be finite and >= 0, got -0.1");
  ReduceLROnPlateau plateau(t.sgd);
  CHECK(thrown([&] { plateau.step(NAN); }).find("ReduceLROnPlateau: the metric is NaN") !=
        std::string::npos);
  CHECK(plateau.last_epoch() == 0);
}
