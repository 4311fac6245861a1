// Chapter 7 of the learner's path (train/learn-07-optimisers.md): optimisers and schedules. Three
// exercises, each graded through the library's optimisers and schedule: sgd_update (torch.optim.SGD
// over tensors in float64 and over a module's flat buffer in float32, at a schedule's rates and a
// group's own weight decay, and a small network it must train), adam_step_scales (the first
// step's size, AdamW and Adam against torch, and a small network AdamW must train) and
// Schedule::at (the warm-up then cosine rate at chosen steps, with three floors). The golden values
// are PyTorch 1.13's (tools/learn/goldens_ch07.py prints them; the schedule's are its formula in
// Python). It does not time the update: the library's tests and benchmarks do.
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/layers.h"
#include "tensor/rng.h"
#include "tools/learn/grade.h"
#include "train/optim.h"

namespace dg::learn {
namespace {

// ---- PyTorch 1.13's values (tools/learn/goldens_ch07.py) ----------------------------------
const std::vector<double> kStart = {0.5, -1.0, 0.25, 2.0, -0.75, 1.5};
const std::vector<double> kSgdDampenedF64 = {0.614876175345,       -0.97672472919,
                                             0.025447746547499962, 2.14022222863,
                                             -0.8363422123925001,  1.476666134285};
const std::vector<double> kSgdNesterovF32 = {0.5612124800682068,  -1.003499984741211,
                                             0.1109125092625618,  2.0971126556396484,
                                             -0.7884750366210938, 1.4606000185012817};
const std::vector<double> kSgdScheduledF32 = {0.586899995803833,   -0.9810000061988831,
                                              0.11710000038146973, 2.0813000202178955,
                                              -0.8205999732017517, 1.5245999097824097};
const std::vector<double> kSgdGroupDecayF64 = {0.578097,  -0.924879,   0.01343724999999997,
                                               2.0473105, -0.79188925, 1.3834235};
const std::vector<double> kAdamWF64 = {0.511042417298037,  -0.9916954996433934, 0.2260771297961464,
                                       2.0157336788186355, -0.7635674636964012, 1.4994566233157993};
const std::vector<double> kAdamL2F32 = {0.5116891860961914,  -0.9831702709197998,
                                        0.22656747698783875, 2.0195062160491943,
                                        -0.7642890810966492, 1.5017454624176025};
const std::vector<int64_t> kScheduleSteps = {0, 4, 9, 10, 11, 55, 99, 100, 150};
const std::vector<double> kWarmupCosine = {
    0.0001, 0.0005, 0.001, 0.001, 0.000999725872158593, 0.00055, 0.0001002741278414069,
    0.0001, 0.0001};
const std::vector<double> kWarmupCosineFloorHalf = {
    0.0001, 0.0005, 0.001, 0.001, 0.000999847706754774, 0.00075, 0.0005001522932452261,
    0.0005, 0.0005};
const std::vector<int64_t> kToZeroSteps = {0, 1, 10, 20, 39, 40, 41};
const std::vector<double> kCosineToZero = {
    0.02, 0.01996917333733128, 0.017071067811865476, 0.01, 3.082666266872036e-05, 0.0, 0.0};

constexpr double kF64Atol = 1e-13, kF64Rtol = 1e-12;  // torch's bits up to printing
constexpr double kF32Atol = 1e-7, kF32Rtol = 1e-6;

// Step t's gradient of the [2, 3] parameter: the goldens' pattern, exact in float32.
Tensor gradient_at(int64_t t, DType dtype) {
  std::vector<double> g(6);
  for (int64_t i = 0; i < 6; ++i) g[i] = static_cast<double>((i * 3 + t * 5) % 7 - 3) * 0.25;
  return Tensor::from_vector(g, {2, 3}, dtype);
}

// Three steps of an optimiser over one float64 tensor (the over-tensors path); the tensor after.
Tensor three_steps_over_tensor(const std::function<std::unique_ptr<Optimizer>(Tensor)>& make) {
  Tensor p = Tensor::from_vector(kStart, {2, 3}, DType::f64);
  p.set_requires_grad(true);
  const std::unique_ptr<Optimizer> optimizer = make(p);
  for (int64_t t = 0; t < 3; ++t) {
    p.set_grad(gradient_at(t, DType::f64));
    optimizer->step();
  }
  return p;
}

// Three steps over a float32 module's flat buffer (the path the Trainer drives); with `rates`,
// step t runs at rates[t], set on the optimiser as a schedule does.
Tensor three_steps_flat(const std::function<std::unique_ptr<Optimizer>(Module&)>& make,
                        const std::vector<double>& rates = {}) {
  Module model;
  const Tensor p = model.register_parameter("w", Tensor::from_vector(kStart, {2, 3}));
  model.flat_parameters();
  const std::unique_ptr<Optimizer> optimizer = make(model);
  for (int64_t t = 0; t < 3; ++t) {
    p.grad().copy_from(gradient_at(t, DType::f32));
    if (!rates.empty()) optimizer->set_lr(rates[static_cast<size_t>(t)]);
    optimizer->step();
  }
  return p;
}

struct Fit {
  double first = 0, last = 0;  // the loss before the first step and before the last
};
// A 1 -> 16 -> 1 tanh network fitting sin(x) on 32 points of [-2, 2] (float32, full batch), with
// `steps` steps of the optimiser `make` builds.
Fit fit_sine(const std::function<std::unique_ptr<Optimizer>(Module&)>& make, int64_t steps) {
  manual_seed(0);
  Module model;
  const Linear& hidden = model.register_module("hidden", std::make_unique<Linear>(1, 16));
  const Linear& out = model.register_module("out", std::make_unique<Linear>(16, 1));
  std::vector<double> xs(32), ys(32);
  for (int i = 0; i < 32; ++i) {
    xs[i] = -2.0 + 4.0 * i / 31;
    ys[i] = std::sin(xs[i]);
  }
  const Tensor x = Tensor::from_vector(xs, {32, 1}), y = Tensor::from_vector(ys, {32, 1});
  model.flat_parameters();
  const std::unique_ptr<Optimizer> optimizer = make(model);
  Fit fit;
  for (int64_t step = 0; step < steps; ++step) {
    model.zero_grad();
    const Tensor loss = mse_loss(out.forward(tanh(hidden.forward(x))), y);
    fit.last = loss.item();
    if (step == 0) fit.first = fit.last;
    backward(loss);
    optimizer->step();
  }
  return fit;
}

Verdict trains_below(const char* what, const Fit& fit, double bound, int64_t steps) {
  return expect_true(std::isfinite(fit.last) && fit.last < bound,
                     fmt::format("{}: mean squared error {:.4g} at step {} (from {:.4g}); it "
                                 "must fall below {}",
                                 what, fit.last, steps, fit.first, bound));
}

// ---- sgd_update -------------------------------------------------------------------------------

Verdict sgd_dampened_f64() {
  const Tensor p = three_steps_over_tensor([](Tensor param) {
    return std::make_unique<SGD>(
        std::vector<Tensor>{param},
        SGDConfig{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  });
  return expect_values(p, kSgdDampenedF64, {2, 3}, kF64Atol, kF64Rtol,
                       "the parameter after 3 steps");
}

Verdict sgd_nesterov_f32() {
  const Tensor p = three_steps_flat([](Module& m) {
    return std::make_unique<SGD>(m, SGDConfig{.lr = 0.05, .momentum = 0.9, .nesterov = true});
  });
  return expect_values(p, kSgdNesterovF32, {2, 3}, kF32Atol, kF32Rtol,
                       "the parameter after 3 steps");
}

// A schedule sets the group's rate; config.lr is only the rate the optimiser starts with.
Verdict sgd_scheduled_f32() {
  const Tensor p = three_steps_flat(
      [](Module& m) { return std::make_unique<SGD>(m, SGDConfig{.lr = 0.1, .momentum = 0.9}); },
      {0.1, 0.05, 0.02});
  return expect_values(p, kSgdScheduledF32, {2, 3}, kF32Atol, kF32Rtol,
                       "the parameter after 3 steps at rates 0.1, 0.05 and 0.02 (the lr argument, "
                       "not config.lr)");
}

// A parameter group's own weight decay (0.1) wins over the config's (0).
Verdict sgd_group_decay_f64() {
  const Tensor p = three_steps_over_tensor([](Tensor param) {
    return std::make_unique<SGD>(std::vector<ParamGroup>{ParamGroup{{param}, std::nullopt, 0.1}},
                                 SGDConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.0});
  });
  return expect_values(p, kSgdGroupDecayF64, {2, 3}, kF64Atol, kF64Rtol,
                       "the parameter after 3 steps in a group of weight decay 0.1 (the "
                       "weight_decay argument, not config.weight_decay)");
}

constexpr int64_t kSgdSteps = 300;
constexpr double kSgdBound = 0.01;
Verdict sgd_trains() {
  const Fit fit = fit_sine(
      [](Module& m) { return std::make_unique<SGD>(m, SGDConfig{.lr = 0.1, .momentum = 0.9}); },
      kSgdSteps);
  return trains_below("SGD(lr 0.1, momentum 0.9)", fit, kSgdBound, kSgdSteps);
}

// ---- adam_step_scales -------------------------------------------------------------------------

Verdict step_scales_values() {
  const AdamStepScales first = adam_step_scales(0.01, 0.9, 0.999, 1);
  const AdamStepScales third = adam_step_scales(0.01, 0.9, 0.999, 3);
  const double expected_size_3 = 0.01 / (1 - 0.9 * 0.9 * 0.9);
  const double expected_bc2_3 = std::sqrt(1 - 0.999 * 0.999 * 0.999);
  const bool ok = std::abs(first.step_size - 0.1) < 1e-15 &&
                  std::abs(first.bc2_sqrt - std::sqrt(0.001)) < 1e-15 &&
                  std::abs(third.step_size - expected_size_3) < 1e-15 &&
                  std::abs(third.bc2_sqrt - expected_bc2_3) < 1e-15;
  return expect_true(ok,
                     fmt::format("lr 0.01, betas 0.9 and 0.999: step 1 gives ({:.17g}, "
                                 "{:.17g}), expected (0.1, √0.001 = {:.17g}); step 3 gives "
                                 "({:.17g}, {:.17g}), expected ({:.17g}, {:.17g})",
                                 first.step_size, first.bc2_sqrt, std::sqrt(0.001), third.step_size,
                                 third.bc2_sqrt, expected_size_3, expected_bc2_3));
}

// Adam's first step, bias-corrected, is m̂/√v̂ = g/|g| (eps aside): every weight with a gradient
// moves by lr, whatever its gradient's size. Without the corrections it moves by
// (1 − β1)/√(1 − β2) ≈ 3.16 times lr.
Verdict adam_first_step_moves_lr() {
  Module model;
  const Tensor p = model.register_parameter("w", Tensor::from_vector(kStart, {2, 3}));
  model.flat_parameters();
  AdamW optimizer(model, AdamWConfig{.lr = 0.01, .weight_decay = 0.0});
  p.grad().copy_from(gradient_at(0, DType::f32));
  optimizer.step();
  const std::vector<float> after = p.to_floats();
  const std::vector<float> g = gradient_at(0, DType::f32).to_floats();
  for (size_t i = 0; i < after.size(); ++i) {
    const double moved = kStart[i] - after[i];
    const double expected = g[i] > 0 ? 0.01 : g[i] < 0 ? -0.01 : 0.0;
    if (std::abs(moved - expected) > 1e-6)
      return {false, fmt::format("weight {} (gradient {}) moved by {:.6g}, expected {} (lr against "
                                 "the gradient's sign)",
                                 i, g[i], moved, expected)};
  }
  return {true, "every weight moved by lr = 0.01 against its gradient's sign"};
}

Verdict adamw_f64() {
  const Tensor p = three_steps_over_tensor([](Tensor param) {
    return std::make_unique<AdamW>(std::vector<Tensor>{param},
                                   AdamWConfig{.lr = 0.01, .weight_decay = 0.1});
  });
  return expect_values(p, kAdamWF64, {2, 3}, kF64Atol, kF64Rtol, "the parameter after 3 steps");
}

Verdict adam_l2_f32() {
  const Tensor p = three_steps_flat([](Module& m) {
    return std::make_unique<Adam>(m, AdamConfig{.lr = 0.01, .weight_decay = 0.05});
  });
  return expect_values(p, kAdamL2F32, {2, 3}, kF32Atol, kF32Rtol, "the parameter after 3 steps");
}

constexpr int64_t kAdamSteps = 300;
constexpr double kAdamBound = 0.01;
Verdict adamw_trains() {
  const Fit fit = fit_sine(
      [](Module& m) {
        return std::make_unique<AdamW>(m, AdamWConfig{.lr = 0.01, .weight_decay = 0.0});
      },
      kAdamSteps);
  return trains_below("AdamW(lr 0.01)", fit, kAdamBound, kAdamSteps);
}

// ---- Schedule::at -----------------------------------------------------------------------------

Verdict warmup_cosine_values() {
  const Schedule schedule = Schedule::parse("cosine", 1e-3, 10, 100);  // min_lr_ratio 0.1
  std::vector<double> rates;
  for (int64_t step : kScheduleSteps) rates.push_back(schedule.at(step));
  const Tensor got = Tensor::from_vector(rates, {static_cast<int64_t>(rates.size())}, DType::f64);
  return expect_values(got, kWarmupCosine, got.shape(), 1e-18, 1e-12,
                       "lr 1e-3, 10 warm-up steps of 100, at steps 0, 4, 9, 10, 11, 55, 99, 100, "
                       "150");
}

// min_lr_ratio is the schedule's floor, a field like the others: 0.5 here, not the default 0.1.
Verdict warmup_cosine_floor_half() {
  Schedule schedule = Schedule::parse("cosine", 1e-3, 10, 100);
  schedule.min_lr_ratio = 0.5;
  std::vector<double> rates;
  for (int64_t step : kScheduleSteps) rates.push_back(schedule.at(step));
  const Tensor got = Tensor::from_vector(rates, {static_cast<int64_t>(rates.size())}, DType::f64);
  return expect_values(got, kWarmupCosineFloorHalf, got.shape(), 1e-18, 1e-12,
                       "lr 1e-3, min_lr_ratio 0.5, 10 warm-up steps of 100, at steps 0, 4, 9, 10, "
                       "11, 55, 99, 100, 150");
}

// No warm-up, down to zero at step 40 and flat after.
Verdict cosine_to_zero() {
  Schedule schedule = Schedule::parse("cosine", 0.02, 0, 40);
  schedule.min_lr_ratio = 0.0;
  std::vector<double> rates;
  for (int64_t step : kToZeroSteps) rates.push_back(schedule.at(step));
  const Tensor got = Tensor::from_vector(rates, {static_cast<int64_t>(rates.size())}, DType::f64);
  return expect_values(got, kCosineToZero, got.shape(), 1e-18, 1e-12,
                       "lr 0.02, no warm-up, min_lr_ratio 0 over 40 steps, at steps 0, 1, 10, 20, "
                       "39, 40, 41");
}

Verdict constant_values() {
  const Schedule schedule = Schedule::parse("constant", 3e-4, 10, 100);
  for (int64_t step : {0, 5, 10, 99, 1000})
    if (schedule.at(step) != 3e-4)
      return {false, fmt::format("a constant schedule of 3e-4 (warm-up 10 is ignored) gave {} at "
                                 "step {}",
                                 schedule.at(step), step)};
  return {true, "3e-4 at steps 0, 5, 10, 99 and 1000 (warm-up does not apply)"};
}

}  // namespace

Chapter chapter() {
  Chapter c;
  c.number = 7;
  c.title = "optimisers and schedules";
  c.text = "train/learn-07-optimisers.md";
  c.exercises.push_back(Exercise{
      "sgd_update",
      "train/optim/sgd.cpp",
      {{"SGD(momentum, dampening, weight decay), float64 over a tensor: torch's values",
        sgd_dampened_f64},
       {"SGD(Nesterov), float32 over a module's flat buffer: torch's values", sgd_nesterov_f32},
       {"SGD(momentum) at the rates a schedule sets: torch's values", sgd_scheduled_f32},
       {"SGD(momentum), a group's own weight decay: torch's values", sgd_group_decay_f64},
       {"SGD with momentum fits sin(x) with a small network", sgd_trains}}});
  c.exercises.push_back(
      Exercise{"adam_step_scales",
               "train/optim/adam.cpp",
               {{"the bias corrections at steps 1 and 3", step_scales_values},
                {"AdamW's first step moves every weight by lr", adam_first_step_moves_lr},
                {"AdamW(weight decay 0.1), float64 over a tensor: torch's values", adamw_f64},
                {"Adam(L2 0.05), float32 over a module's flat buffer: torch's values", adam_l2_f32},
                {"AdamW fits sin(x) with a small network", adamw_trains}}});
  c.exercises.push_back(Exercise{"Schedule::at",
                                 "train/optim/schedule.cpp",
                                 {{"warm-up then cosine at chosen steps", warmup_cosine_values},
                                  {"a floor of half the rate", warmup_cosine_floor_half},
                                  {"cosine to zero without warm-up", cosine_to_zero},
                                  {"a constant schedule", constant_values}}});
  return c;
}

}  // namespace dg::learn
