// Chapter 8 of the learner's path (train/learn-08-training-loop.md): the training loop and exact
// resume. Three exercises, graded through the library's public API: total_norm_from_block_sums
// and scale_gradients_for_clip through clip_grad_norm over a module's flat buffer (against
// torch.nn.utils.clip_grad_norm_, values from tools/learn/goldens_ch08.py), and optimizer_state
// through a training checkpoint: N steps straight and N/2 steps, a save, a load into a fresh
// model and optimiser, then N/2 more must give the same weights byte for byte. It does not run the
// Trainer itself (its own tests do, with the data position and RNG state as well): the resume
// check drives the loop by hand so that only the model and optimiser state matter.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/layers.h"
#include "tensor/rng.h"
#include "tools/learn/grade.h"
#include "train/checkpoint.h"
#include "train/io/safetensors.h"
#include "train/optim.h"

namespace dg::learn {
namespace {

// ---- PyTorch 1.13's values (tools/learn/goldens_ch08.py) ----------------------------------
const double kTotalNorm = 2.2514965534210205;
const std::vector<double> kClippedW = {-0.5551860332489014, 0.0,
                                       0.5551860332489014,  -0.11103720963001251,
                                       0.44414883852005005, -0.22207441926002502};
const std::vector<double> kClippedB = {-0.11103720963001251, 0.0, 0.11103720963001251};
const double kClippedBigElement1 = -0.001409652060829103;

constexpr double kF32Atol = 1e-8, kF32Rtol = 2e-7;  // torch's float32 norm, one rounding apart

// The goldens' gradient pattern, exact in float32.
std::vector<double> pattern(int64_t n, int64_t mul, int64_t mod, int64_t shift, double div) {
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>((i * mul) % mod - shift) / div;
  return out;
}

// Three float32 parameters [2, 3], [3], [10000] (the last spans two norm blocks) in a module's
// flat buffer, their gradients set to the goldens' patterns.
struct ClipModel {
  Module model;
  Tensor w, b, big;
  ClipModel() {
    w = model.register_parameter("w", Tensor::zeros({2, 3}));
    b = model.register_parameter("b", Tensor::zeros({3}));
    big = model.register_parameter("big", Tensor::zeros({10000}));
    model.flat_parameters();
    w.grad().copy_from(Tensor::from_vector(pattern(6, 5, 11, 5, 4), {2, 3}));
    b.grad().copy_from(Tensor::from_vector(pattern(3, 2, 5, 2, 8), {3}));
    big.grad().copy_from(Tensor::from_vector(pattern(10000, 37, 101, 50, 4096), {10000}));
  }
};

// ---- total_norm_from_block_sums ---------------------------------------------------------------

Verdict total_norm_as_torch() {
  ClipModel m;
  const ClipResult r = clip_grad_norm(m.model, 1000.0);
  const double difference = std::abs(r.total_norm - kTotalNorm);
  return expect_true(difference <= kF32Atol + kF32Rtol * kTotalNorm,
                     fmt::format("clip_grad_norm's total norm over [2, 3], [3] and [10000] "
                                 "float32 gradients: {:.9g}, torch's {:.9g} (off by {:.3g})",
                                 r.total_norm, kTotalNorm, difference));
}

Verdict total_norm_many_blocks_f64() {
  Module model(DType::f64);
  const Tensor p = model.register_parameter("p", Tensor::zeros({20000}, DType::f64));
  const Tensor q = model.register_parameter("q", Tensor::zeros({7}, DType::f64));
  model.flat_parameters();
  const std::vector<double> gp = pattern(20000, 13, 97, 48, 64), gq = pattern(7, 3, 5, 2, 2);
  p.grad().copy_from(Tensor::from_vector(gp, {20000}, DType::f64));
  q.grad().copy_from(Tensor::from_vector(gq, {7}, DType::f64));
  double sq = 0;
  for (double v : gp) sq += v * v;
  for (double v : gq) sq += v * v;
  const double expected = std::sqrt(sq);
  const ClipResult r = clip_grad_norm(model, 1e9);
  const double difference = std::abs(r.total_norm - expected);
  return expect_true(difference <= 1e-12 * expected,
                     fmt::format("float64 gradients [20000] (three blocks of 8192) and [7]: total "
                                 "norm {:.17g}, expected √Σg² = {:.17g} (off by {:.3g})",
                                 r.total_norm, expected, difference));
}

// ---- scale_gradients_for_clip -----------------------------------------------------------------

// These two call scale_gradients_for_clip as clip_grad_norm does, with torch's total norm, so that
// they grade it alone (clip_grad_norm would first call total_norm_from_block_sums).
Verdict clipped_as_torch() {
  ClipModel m;
  FlatParameters& flat = m.model.flat_parameters();
  const ClipResult r = scale_gradients_for_clip(flat, kTotalNorm, 1.0, 0, flat.total);
  if (!r.clipped)
    return {false, fmt::format("clip at max_norm 1 of a total norm {:.6g}: clipped is false",
                               r.total_norm)};
  Verdict v = expect_values(m.w.grad(), kClippedW, {2, 3}, kF32Atol, kF32Rtol,
                            "w's gradient after clip_grad_norm(max_norm 1)");
  if (!v.passed) return v;
  v = expect_values(m.b.grad(), kClippedB, {3}, kF32Atol, kF32Rtol,
                    "b's gradient after clip_grad_norm(max_norm 1)");
  if (!v.passed) return v;
  const double got = m.big.grad().at({1});
  const bool close = std::abs(got - kClippedBigElement1) <= kF32Atol + kF32Rtol * 1e-3;
  if (!close)
    return {false,
            fmt::format("big's element 1 is {:.9g} (torch: {:.9g})", got, kClippedBigElement1)};
  // Every element of big, the last included, scaled by the same float32 coefficient.
  const float coef = static_cast<float>(1.0 / (kTotalNorm + 1e-6));
  const std::vector<double> before = pattern(10000, 37, 101, 50, 4096);
  const std::vector<double> after = m.big.grad().to_vector();
  for (size_t i = 0; i < after.size(); ++i)
    if (after[i] != static_cast<double>(static_cast<float>(before[i]) * coef))
      return {false, fmt::format("big's element {} is {:.9g}; scaled by max_norm / (total + 1e-6) "
                                 "it is {:.9g} (was {:.9g}): every element from begin to end must "
                                 "be scaled",
                                 i, after[i], static_cast<float>(before[i]) * coef, before[i])};
  return {true, fmt::format("every gradient scaled by max_norm / (total + 1e-6), as torch; big's "
                            "element 1 is {:.9g} (torch: {:.9g}), all 10000 scaled",
                            got, kClippedBigElement1)};
}

Verdict unclipped_untouched() {
  ClipModel m;
  FlatParameters& flat = m.model.flat_parameters();
  const std::vector<double> before = flat.gradients.to_vector();
  const ClipResult r = scale_gradients_for_clip(flat, kTotalNorm, 1000.0, 0, flat.total);
  if (r.clipped) return {false, "clip at max_norm 1000 of a total norm near 2.25: clipped is true"};
  if (r.total_norm != kTotalNorm)
    return {false, fmt::format("the returned total norm is {:.9g}; the one computed and passed "
                               "in was {:.9g}",
                               r.total_norm, kTotalNorm)};
  const std::vector<double> after = flat.gradients.to_vector();
  for (size_t i = 0; i < after.size(); ++i)
    if (after[i] != before[i])
      return {false, fmt::format("under max_norm nothing may change, as torch (whose coefficient "
                                 "is clamped to 1); gradient element {} went from {:.9g} to {:.9g}",
                                 i, before[i], after[i])};
  return {true, "a total norm of 2.25 under max_norm 1000: not clipped, every gradient bit kept"};
}

// ---- optimizer_state --------------------------------------------------------------------------

// A 1 -> 8 -> 1 tanh network (float32) and the full-batch loss of fitting sin(x) on 16 points.
struct Net {
  Module model;
  const Linear* hidden;
  const Linear* out;
  explicit Net(uint64_t seed) {
    manual_seed(seed);
    hidden = &model.register_module("hidden", std::make_unique<Linear>(1, 8));
    out = &model.register_module("out", std::make_unique<Linear>(8, 1));
    model.flat_parameters();
  }
  void train_steps(Optimizer& optimizer, int64_t steps) {
    std::vector<double> xs(16), ys(16);
    for (int i = 0; i < 16; ++i) {
      xs[i] = -2.0 + 4.0 * i / 15;
      ys[i] = std::sin(xs[i]);
    }
    const Tensor x = Tensor::from_vector(xs, {16, 1}), y = Tensor::from_vector(ys, {16, 1});
    for (int64_t s = 0; s < steps; ++s) {
      model.zero_grad();
      backward(mse_loss(out->forward(tanh(hidden->forward(x))), y));
      optimizer.step();
    }
  }
};

std::string temporary_path(const char* what) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("depthgrad-learn-ch08-{}-{}.safetensors", what, getpid()))
      .string();
}

using MakeOptimizer = std::function<std::unique_ptr<FlatOptimizer>(Module&)>;

// 6 steps straight against 3 steps, a checkpoint, a fresh model (another seed) and optimiser
// loaded from it, and 3 more steps: the weights must agree byte for byte.
Verdict resumes_exactly(const MakeOptimizer& make, const char* what) {
  constexpr int64_t kSteps = 6;
  Net straight(0);
  std::unique_ptr<FlatOptimizer> straight_optimizer = make(straight.model);
  straight.train_steps(*straight_optimizer, kSteps);

  const std::string path = temporary_path(what);
  {
    Net first(0);
    std::unique_ptr<FlatOptimizer> optimizer = make(first.model);
    first.train_steps(*optimizer, kSteps / 2);
    save_training_checkpoint(path, first.model, *optimizer, TrainingState{});
  }
  Net resumed(99);  // other weights: the load must overwrite them
  std::unique_ptr<FlatOptimizer> optimizer = make(resumed.model);
  try {
    load_training_checkpoint(path, resumed.model, *optimizer);
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
  std::filesystem::remove(path);
  resumed.train_steps(*optimizer, kSteps - kSteps / 2);

  const Tensor a = straight.model.flat_parameters().values;
  const Tensor b = resumed.model.flat_parameters().values;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(pa + i, pb + i, sizeof(float)) != 0)
      return {false, fmt::format("{}: after {} steps straight and {} + save + load + {}, flat "
                                 "weight element {} differs: {:.9g} straight, {:.9g} resumed (a "
                                 "piece of the optimiser's state was not saved or not restored)",
                                 what, kSteps, kSteps / 2, kSteps - kSteps / 2, i, pa[i], pb[i])};
  return {true, fmt::format("{}: {} weights equal byte for byte after {} steps straight and "
                            "{} + save + load + {}",
                            what, a.numel(), kSteps, kSteps / 2, kSteps - kSteps / 2)};
}

Verdict adamw_resumes() {
  return resumes_exactly(
      [](Module& m) {
        return std::make_unique<AdamW>(m, AdamWConfig{.lr = 0.01, .weight_decay = 0.1});
      },
      "AdamW");
}

Verdict sgd_resumes() {
  return resumes_exactly(
      [](Module& m) { return std::make_unique<SGD>(m, SGDConfig{.lr = 0.05, .momentum = 0.9}); },
      "SGD");
}

Verdict checkpoint_holds_state() {
  const std::string path = temporary_path("contents");
  Net net(0);
  AdamW optimizer(net.model, AdamWConfig{.lr = 0.01});
  net.train_steps(optimizer, 2);
  save_training_checkpoint(path, net.model, optimizer, TrainingState{});
  const SafetensorsFile file = load_safetensors(path);
  std::filesystem::remove(path);
  for (const char* name :
       {"hidden.weight", "optimizer.exp_avg.hidden.weight", "optimizer.exp_avg_sq.out.bias"})
    if (!file.find(name))
      return {false, fmt::format("the training checkpoint has no tensor '{}'", name)};
  const auto it = file.metadata.find("depthgrad.optimizer_step");
  if (it == file.metadata.end() || it->second != "2")
    return {false, fmt::format("the checkpoint's metadata 'depthgrad.optimizer_step' is '{}', "
                               "expected '2' (AdamW's step count after 2 steps)",
                               it == file.metadata.end() ? "missing" : it->second)};
  return {true, "weights, exp_avg and exp_avg_sq per parameter, and the step count 2"};
}

}  // namespace

Chapter chapter() {
  Chapter c;
  c.number = 8;
  c.title = "the training loop and exact resume";
  c.text = "train/learn-08-training-loop.md";
  c.exercises.push_back(Exercise{
      "total_norm_from_block_sums",
      "train/optim/clip.cpp",
      {{"clip_grad_norm's total norm over three float32 parameters: torch's", total_norm_as_torch},
       {"a float64 parameter of three blocks: √Σg²", total_norm_many_blocks_f64}}});
  c.exercises.push_back(Exercise{
      "scale_gradients_for_clip",
      "train/optim/clip.cpp",
      {{"clip at max_norm 1: the gradients torch's clip_grad_norm_ leaves", clipped_as_torch},
       {"under max_norm: nothing scaled, clipped false", unclipped_untouched}}});
  c.exercises.push_back(Exercise{
      "optimizer_state",
      "train/checkpoint.cpp",
      {{"a training checkpoint holds the moments and the step count", checkpoint_holds_state},
       {"AdamW: 6 steps straight equal 3 + save + load + 3, byte for byte", adamw_resumes},
       {"SGD with momentum: 6 steps straight equal 3 + save + load + 3, byte for byte",
        sgd_resumes}}});
  return c;
}

}  // namespace dg::learn
