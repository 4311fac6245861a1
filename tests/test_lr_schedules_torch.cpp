// MultiStepLR, ExponentialLR, LinearLR and SequentialLR against torch 1.13 (goldens from
// tools/torch_goldens_schedules_loader.py in tests/schedules_loader_goldens.h): get_last_lr()
// after the construction and after each of 30 steps, two groups, bit for bit (torch's
// chainable recurrence, replayed in its order); the same rates after set_step (a resume) at
// every step; LinearWarmupLR as LinearLR's closed-form case; the refusals, naming the setting.
// The Trainer's exact resume with these schedules is in tests/test_trainer_groups.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "tests/schedules_loader_goldens.h"
#include "train/optim.h"

using namespace dg;

namespace {
struct TwoGroups {
  Tensor w = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  Tensor b = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  SGD sgd{{{.params = {w}}, {.params = {b}, .lr = 0.5}}, SGDConfig{.lr = 0.1}};
};

using Make = std::function<std::vector<std::unique_ptr<LrScheduler>>(Optimizer&)>;

// The rates after construction and after each step; the last schedule made is the one stepped.
std::vector<double> run(const Make& make, int steps) {
  TwoGroups t;
  auto schedules = make(t.sgd);
  LrScheduler& s = *schedules.back();
  std::vector<double> rates = s.get_last_lr();
  for (int i = 0; i < steps; ++i) {
    t.sgd.step();
    s.step();
    for (double r : s.get_last_lr()) rates.push_back(r);
  }
  return rates;
}

void check_torch(const Make& make, const std::vector<double>& golden) {
  const std::vector<double> got = run(make, 30);
  REQUIRE(got.size() == golden.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - golden[i]) <= 1e-12 * std::fabs(golden[i]));
    CHECK(got[i] == golden[i]);  // torch's recurrence, bit for bit
  }
  // A resume: a fresh schedule moved to step k has step k's rates, bit for bit.
  for (int k = 0; k <= 30; ++k) {
    TwoGroups t;
    auto schedules = make(t.sgd);
    schedules.back()->set_step(k);
    const std::vector<double> rates = schedules.back()->get_last_lr();
    CAPTURE(k);
    CHECK(rates[0] == golden[2 * k]);
    CHECK(rates[1] == golden[2 * k + 1]);
  }
}

template <class S, class... A>
Make one(A... args) {
  return [=](Optimizer& o) {
    std::vector<std::unique_ptr<LrScheduler>> v;
    v.push_back(std::make_unique<S>(o, args...));
    return v;
  };
}

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("MultiStepLR, ExponentialLR and LinearLR match torch 1.13 step by step") {
  check_torch(one<MultiStepLR>(std::vector<int64_t>{5, 12, 12, 20}, 0.3), kMultiStep);
  check_torch(one<ExponentialLR>(0.9), kExponential);
  check_torch(one<LinearLR>(), kLinearDefault);  // start 1/3, end 1, 5 iterations
  check_torch(one<LinearLR>(0.25, 0.75, int64_t{10}), kLinearPartial);
  check_torch(one<LinearLR>(1.0, 0.0, int64_t{7}), kLinearDown);
}

TEST_CASE("SequentialLR matches torch 1.13: each schedule restarts at its milestone") {
  check_torch(
      [](Optimizer& o) {
        std::vector<std::unique_ptr<LrScheduler>> v;
        v.push_back(std::make_unique<LinearLR>(o, 0.1, 1.0, 5));
        v.push_back(std::make_unique<ExponentialLR>(o, 0.9));
        v.push_back(std::make_unique<SequentialLR>(
            o, std::vector<LrScheduler*>{v[0].get(), v[1].get()}, std::vector<int64_t>{5}));
        return v;
      },
      kSequentialTwo);
  check_torch(
      [](Optimizer& o) {
        std::vector<std::unique_ptr<LrScheduler>> v;
        v.push_back(std::make_unique<LinearLR>(o, 0.5, 1.0, 4));
        v.push_back(std::make_unique<MultiStepLR>(o, std::vector<int64_t>{3, 6}, 0.5));
        v.push_back(std::make_unique<ExponentialLR>(o, 0.8));
        v.push_back(std::make_unique<SequentialLR>(
            o, std::vector<LrScheduler*>{v[0].get(), v[1].get(), v[2].get()},
            std::vector<int64_t>{4, 12}));
        return v;
      },
      kSequentialThree);
}

TEST_CASE("LinearWarmupLR is LinearLR(1/w, 1, w − 1) in closed form, within rounding") {
  TwoGroups a, b;
  LinearWarmupLR warm(a.sgd, 4);
  LinearLR linear(b.sgd, 0.25, 1.0, 3);
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    for (size_t g = 0; g < 2; ++g)
      CHECK(warm.get_last_lr()[g] == doctest::Approx(linear.get_last_lr()[g]).epsilon(1e-14));
    warm.step();
    linear.step();
  }
}

TEST_CASE("the torch schedules refuse bad settings, naming them") {
  TwoGroups t;
  CHECK(thrown([&] { LinearLR(t.sgd, 0.0); }) == "LinearLR: start_factor must be in (0, 1], got 0");
  CHECK(thrown([&] { LinearLR(t.sgd, 0.5, 1.5); }) ==
        "LinearLR: end_factor must be in [0, 1], got 1.5");
  CHECK(thrown([&] { LinearLR(t.sgd, 0.5, 1.0, 0); }) ==
        "LinearLR: total_iters must be >= 1, got 0");
  CHECK(thrown([&] {
          MultiStepLR(t.sgd, {3, -1});
        }) == "MultiStepLR: milestones must be >= 0, got -1");
  ExponentialLR e(t.sgd, 0.9);
  LinearLR l(t.sgd);
  CHECK(thrown([&] {
          SequentialLR(t.sgd, {&l, &e}, {});
        }) ==
        "SequentialLR: expects one more scheduler than milestones, got 2 schedulers and 0 "
        "milestones");
  CHECK(thrown([&] {
          SequentialLR(t.sgd, {&l, &e, &l}, {5, 3});
        }) == "SequentialLR: milestones must be increasing and >= 1, got 3 at position 1");
  TwoGroups other;
  ExponentialLR elsewhere(other.sgd, 0.9);
  CHECK(thrown([&] {
          SequentialLR(t.sgd, {&l, &elsewhere}, {2});
        }) ==
        "SequentialLR: expects all schedulers to belong to the same optimizer, but scheduler 1 "
        "is over another one");
  ReduceLROnPlateau plateau(t.sgd);
  CHECK(thrown([&] {
          SequentialLR(t.sgd, {&l, &plateau}, {2});
        }) == "SequentialLR: scheduler 1 follows a metric (ReduceLROnPlateau), not the step");
}

TEST_CASE("an optimiser over no parameters is refused as torch's, for every optimiser") {
  const std::string empty = "optimizer got an empty parameter list";
  std::vector<Tensor> none;
  CHECK(thrown([&] { SGD(none, SGDConfig{}); }).find("SGD: " + empty) == 0);
  CHECK(thrown([&] { Adam(none, AdamConfig{}); }).find("Adam: " + empty) == 0);
  CHECK(thrown([&] { AdamW(none, AdamWConfig{}); }).find("AdamW: " + empty) == 0);
  CHECK(thrown([&] { RMSprop(none, RMSpropConfig{}); }).find("RMSprop: " + empty) == 0);
  CHECK(thrown([&] { Adagrad(none, AdagradConfig{}); }).find("Adagrad: " + empty) == 0);
  std::vector<ParamGroup> empty_groups{{.params = {}}, {.params = {}, .weight_decay = 0.0}};
  CHECK(thrown([&] { AdamW(empty_groups, AdamWConfig{}); }) ==
        "AdamW: optimizer got an empty parameter list (2 parameter group(s), every one empty; "
        "was the model's parameters() taken before its layers were registered, or a layer kept "
        "as a plain member instead of through register_module?)");
  Module nothing;  // a model whose layers were never registered
  for (const std::string& message :
       {thrown([&] { SGD(nothing, SGDConfig{}); }), thrown([&] { Adam(nothing, AdamConfig{}); }),
        thrown([&] { AdamW(nothing, AdamWConfig{}); }),
        thrown([&] { RMSprop(nothing, RMSpropConfig{}); }),
        thrown([&] { Adagrad(nothing, AdagradConfig{}); })}) {
    CAPTURE(message);
    CHECK(message.find(": " + empty + " (the module passed has no parameters") !=
          std::string::npos);
    CHECK(message.find("register_module") != std::string::npos);
  }
}
