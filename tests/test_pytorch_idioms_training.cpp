// PyTorch training idioms translated line by line (schedules, parameter groups, the DataLoader,
// torch.autograd.grad), each against torch 1.13's values from tools/pytorch_idioms/training.py
// (tests/pytorch_idioms/training_goldens.h): float64 at 1e-12 (relative, or absolute near 0),
// index orders exactly. The torch lines are in each case's comment, the depthgrad lines below.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/module.h"
#include "nn/recurrent.h"
#include "tensor/factory.h"
#include "tests/pytorch_idioms/training_goldens.h"
#include "train/dataset.h"
#include "train/optim.h"

using namespace dg;
using namespace idioms_training;

namespace {
void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 double tolerance = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= tolerance * std::max(1.0, std::fabs(want[i])));
  }
}

Tensor pattern(int64_t n, int64_t mul, int64_t mod, int64_t shift, double div, Shape shape) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>((k * mul) % mod - shift) / div);
  return Tensor::from_vector(v, shape, DType::f64);
}

// The generator's model y = x·Wᵀ + b in float64, and its data.
struct Model {
  Tensor w = pattern(6, 5, 11, 5, 10.0, {2, 3}).set_requires_grad(true);
  Tensor b = pattern(2, 3, 7, 1, 10.0, {2}).set_requires_grad(true);
};
const Tensor kX = pattern(30, 7, 13, 6, 4.0, {10, 3});
const Tensor kY = pattern(20, 3, 11, 5, 5.0, {10, 2});

Tensor loss_of(const Model& m, const Tensor& x, const Tensor& y) {
  return mse_loss(linear(x, m.w, m.b), y);  // F.mse_loss(x @ w.T + b, y)
}

// One SGD over a tensor at lr 0.1 and a schedule made by `make`: get_last_lr() after the
// construction and after each of `steps` steps.
template <class Make>
std::vector<double> rates(Make make, int steps) {
  Tensor w = Tensor::zeros({1}, DType::f64).set_requires_grad(true);
  SGD opt({w}, SGDConfig{.lr = 0.1});
  auto sched = make(opt);
  std::vector<double> out = sched->get_last_lr();
  for (int i = 0; i < steps; ++i) {
    opt.step();
    sched->step();
    out.push_back(sched->get_last_lr()[0]);
  }
  return out;
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

// scheduler = MultiStepLR(optimizer, milestones=[30, 80], gamma=0.1)
TEST_CASE("idiom: MultiStepLR(optimizer, milestones=[30, 80], gamma=0.1)") {
  check_close(rates(
                  [](Optimizer& o) {
                    return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{30, 80}, 0.1);
                  },
                  100),
              kMultiStep);
}

// scheduler = ExponentialLR(optimizer, gamma=0.9)
TEST_CASE("idiom: ExponentialLR(optimizer, gamma=0.9)") {
  check_close(rates([](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.9); }, 10),
              kExponential);
}

// scheduler = LinearLR(optimizer, start_factor=0.5, total_iters=4)
TEST_CASE("idiom: LinearLR(optimizer, start_factor=0.5, total_iters=4)") {
  check_close(rates([](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.5, 1.0, 4); }, 6),
              kLinear);
}

// scheduler = LinearLR(optimizer)   # start_factor=1/3, end_factor=1.0, total_iters=5
TEST_CASE("idiom: LinearLR(optimizer) with its defaults") {
  check_close(rates([](Optimizer& o) { return std::make_unique<LinearLR>(o); }, 7), kLinearDefault);
}

// s1 = LinearLR(optimizer, start_factor=0.1, total_iters=2)
// s2 = ExponentialLR(optimizer, gamma=0.9)
// scheduler = SequentialLR(optimizer, schedulers=[s1, s2], milestones=[2])
TEST_CASE("idiom: SequentialLR(optimizer, [LinearLR, ExponentialLR], milestones=[2])") {
  Tensor w = Tensor::zeros({1}, DType::f64).set_requires_grad(true);
  SGD optimizer({w}, SGDConfig{.lr = 0.1});
  LinearLR s1(optimizer, 0.1, 1.0, 2);
  ExponentialLR s2(optimizer, 0.9);
  SequentialLR scheduler(optimizer, {&s1, &s2}, {2});
  std::vector<double> got = scheduler.get_last_lr();
  for (int i = 0; i < 8; ++i) {
    optimizer.step();
    scheduler.step();
    got.push_back(scheduler.get_last_lr()[0]);
  }
  check_close(got, kSequential);
}

// scheduler = StepLR(optimizer, step_size=3, gamma=0.5)
// for epoch in range(7): ...; scheduler.step(); print(scheduler.get_last_lr())
TEST_CASE("idiom: StepLR(optimizer, step_size=3, gamma=0.5); scheduler.get_last_lr()") {
  check_close(rates([](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }, 7), kStep);
}

// sd = scheduler.state_dict(); ...; scheduler.load_state_dict(sd)   # resume at epoch 5
TEST_CASE("idiom: scheduler.load_state_dict(scheduler.state_dict()) to resume") {
  Tensor w = Tensor::zeros({1}, DType::f64).set_requires_grad(true);
  SGD optimizer({w}, SGDConfig{.lr = 0.1});
  MultiStepLR scheduler(optimizer, {30, 80}, 0.1);
  scheduler.set_step(85);  // a rule of the step: its state is the step (the Trainer saves it)
  CHECK(scheduler.get_last_lr()[0] == kMultiStep[85]);
}

// optimizer = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1},
//                                {'params': no_decay, 'weight_decay': 0.0}], lr=0.01)
TEST_CASE(
    "idiom: AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': "
    "0.0}])") {
  Model m;
  AdamW optimizer({{.params = {m.w}, .weight_decay = 0.1}, {.params = {m.b}, .weight_decay = 0.0}},
                  AdamWConfig{.lr = 0.01});
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    backward(loss_of(m, kX, kY));
    optimizer.step();
  }
  check_close(m.w.to_vector(), kGroupsW);
  check_close(m.b.to_vector(), kGroupsB);
}

// decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
// no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
TEST_CASE("idiom: decay / no_decay split by p.dim() (nanoGPT's configure_optimizers)") {
  Module model;
  Model m;
  model.register_parameter("weight", m.w);
  model.register_parameter("bias", m.b);
  AdamW optimizer(weight_decay_groups(model, 0.1), AdamWConfig{.lr = 0.01});
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    backward(loss_of(m, kX, kY));
    optimizer.step();
  }
  check_close(m.w.to_vector(), kGroupsW);
  check_close(m.b.to_vector(), kGroupsB);
}

// optim.SGD([{'params': model.base.parameters()},
//            {'params': model.classifier.parameters(), 'lr': 1e-3}], lr=1e-2, momentum=0.9)
TEST_CASE(
    "idiom: SGD([{'params': base}, {'params': classifier, 'lr': 1e-3}], lr=1e-2, momentum=0.9)") {
  Model m;
  SGD optimizer({{.params = {m.w}}, {.params = {m.b}, .lr = 1e-3}},
                SGDConfig{.lr = 1e-2, .momentum = 0.9});
  for (int i = 0; i < 3; ++i) {
    optimizer.zero_grad();
    backward(loss_of(m, kX, kY));
    optimizer.step();
  }
  check_close(m.w.to_vector(), kPerGroupLrW);
  check_close(m.b.to_vector(), kPerGroupLrB);
}

// optimizer.param_groups[0]['lr'] = 0.01
TEST_CASE("idiom: optimizer.param_groups[0]['lr'] = 0.01") {
  Model m;
  SGD optimizer({m.w, m.b}, SGDConfig{.lr = 0.1});
  optimizer.set_lr(0, 0.01);  // or optimizer.param_groups()[0].lr = 0.01
  optimizer.zero_grad();
  backward(loss_of(m, kX, kY));
  optimizer.step();
  check_close(m.w.to_vector(), kSetLrW);
}

// total = torch.nn.utils.clip_grad_norm_([w, b], max_norm=1.0)
TEST_CASE("idiom: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)") {
  Model m;
  backward(loss_of(m, kX, kY));
  const ClipResult clip = clip_grad_norm({m.w, m.b}, 1.0);
  check_close({clip.total_norm}, kClipNorm);
  check_close(m.w.grad().to_vector(), kClippedGradW);
}

// torch.optim.SGD([], lr=0.1)   # ValueError: optimizer got an empty parameter list
TEST_CASE("idiom: torch.optim.SGD([], lr=0.1) raises 'optimizer got an empty parameter list'") {
  CHECK(thrown([] {
          SGD(std::vector<Tensor>{}, SGDConfig{.lr = 0.1});
        }).find("SGD: optimizer got an empty parameter list") == 0);
  Module forgot;  // layers kept as plain members, never register_module'd
  CHECK(thrown([&] { AdamW(forgot, AdamWConfig{}); }).find("the module passed has no parameters") !=
        std::string::npos);
}

// ds = TensorDataset(x, y)
// for xb, yb in DataLoader(ds, batch_size=4, shuffle=False, drop_last=False): ...
TEST_CASE("idiom: for xb, yb in DataLoader(ds, batch_size=4, shuffle=False, drop_last=False)") {
  TensorDataset ds({kX, kY});
  std::vector<int64_t> sizes;
  std::vector<double> firsts;
  DataLoader loader(ds, {.batch_size = 4, .shuffle = false, .drop_last = false});
  for (const Batch& batch : loader) {
    const Tensor& xb = batch[0];
    const Tensor& yb = batch[1];
    CHECK(yb.size(0) == xb.size(0));
    sizes.push_back(xb.size(0));
    firsts.push_back(xb.to_vector()[0]);
  }
  CHECK(sizes == kPlainSizes);
  check_close(firsts, kPlainFirsts);
}

// len(DataLoader(ds, batch_size=4)); len(DataLoader(ds, batch_size=4, drop_last=True))
TEST_CASE("idiom: len(loader) with drop_last False and True") {
  TensorDataset ds({kX, kY});
  CHECK(DataLoader(ds, {.batch_size = 4}).size() == kLenKeep);
  CHECK(DataLoader(ds, {.batch_size = 4, .drop_last = true}).size() == kLenDrop);
}

// loader = DataLoader(ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
// for epoch in range(2): for (ib,) in loader: ...
TEST_CASE(
    "idiom: DataLoader(ds, batch_size=4, shuffle=True, "
    "generator=torch.Generator().manual_seed(0))") {
  TensorDataset ds({arange(10.0, DType::i64)});
  TorchGenerator g(0);
  DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .generator = &g});
  std::vector<int64_t> order;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (const Batch& batch : loader)
      for (double v : batch[0].to_vector()) order.push_back(static_cast<int64_t>(v));
  CHECK(order == kShuffledOrder);
}

// DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, generator=...)
TEST_CASE("idiom: DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)") {
  TensorDataset ds({arange(10.0, DType::i64)});
  TorchGenerator g(0);
  DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .drop_last = true, .generator = &g});
  std::vector<int64_t> order;
  for (const Batch& batch : loader)
    for (double v : batch[0].to_vector()) order.push_back(static_cast<int64_t>(v));
  CHECK(order == kShuffledDropOrder);
}

// for epoch in range(3):
//     for xb, yb in loader:
//         optimizer.zero_grad(); loss = F.mse_loss(model(xb), yb); loss.backward();
//         optimizer.step()
//     scheduler.step()
TEST_CASE(
    "idiom: the epoch loop: for xb, yb in loader: zero_grad, backward, step; scheduler.step()") {
  Model m;
  SGD optimizer({m.w, m.b}, SGDConfig{.lr = 0.05, .momentum = 0.9});
  MultiStepLR scheduler(optimizer, {2}, 0.1);
  TensorDataset ds({kX, kY});
  TorchGenerator g(1);
  DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .generator = &g});
  std::vector<double> losses;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (const Batch& batch : loader) {
      optimizer.zero_grad();
      Tensor loss = loss_of(m, batch[0], batch[1]);
      backward(loss);
      optimizer.step();
      losses.push_back(loss.item());
    }
    scheduler.step();
  }
  check_close(losses, kLoopLosses);
  check_close(m.w.to_vector(), kLoopW);
}

// y = (x ** 3).sum()
// (g,) = torch.autograd.grad(y, x, create_graph=True)
// (gg,) = torch.autograd.grad(g.sum(), x)
TEST_CASE("idiom: torch.autograd.grad(y, x, create_graph=True), then grad of the gradient") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0}, {3}, DType::f64)
                 .set_requires_grad(true);
  Tensor y = sum(pow(x, 3.0));
  Tensor g = grad({y}, {x}, {.create_graph = true})[0];
  Tensor gg = grad({sum(g)}, {x})[0];
  check_close(g.to_vector(), kFirst);
  check_close(gg.to_vector(), kSecond);
}

// (g,) = torch.autograd.grad(y, x)        # no create_graph
// torch.autograd.grad(g.sum(), x)         # RuntimeError: ... does not require grad
TEST_CASE("idiom: a second torch.autograd.grad without create_graph on the first raises") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0}, {3}, DType::f64)
                 .set_requires_grad(true);
  Tensor g = grad({sum(pow(x, 3.0))}, {x})[0];
  const std::string message = thrown([&] { grad({sum(g)}, {x}); });
  CHECK(message.find("does not require grad") != std::string::npos);
  CHECK(message.find("needs create_graph = true") != std::string::npos);
}

// (vjp,) = torch.autograd.grad(torch.sin(x) * x, x, grad_outputs=v)
TEST_CASE("idiom: torch.autograd.grad(outputs, x, grad_outputs=v)") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0}, {3}, DType::f64)
                 .set_requires_grad(true);
  Tensor v = Tensor::from_vector(std::vector<double>{1.0, 0.5, -2.0}, {3}, DType::f64);
  Tensor vjp = grad({mul(sin(x), x)}, {x}, {.grad_outputs = {v}})[0];
  check_close(vjp.to_vector(), kVjp);
}

// torch.autograd.grad(y, [x, unused], allow_unused=True)   # (dx, None)
TEST_CASE("idiom: torch.autograd.grad(y, [x, unused], allow_unused=True)") {
  Tensor x = Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0}, {3}, DType::f64)
                 .set_requires_grad(true);
  Tensor unused = Tensor::zeros({2}, DType::f64).set_requires_grad(true);
  std::vector<Tensor> g =
      grad({sum(pow(x, 3.0))}, {x, unused}, {.retain_graph = false, .allow_unused = true});
  check_close(g[0].to_vector(), kFirst);
  CHECK_FALSE(g[1].defined());  // torch's None
}

// lstm = nn.LSTM(3, 4); out, _ = lstm(x)
// (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)   # double backward through LSTM
TEST_CASE("idiom: torch.autograd.grad(lstm(x)[0].sum(), x, create_graph=True)") {
  LSTM lstm({.input_size = 3, .hidden_size = 4}, DType::f64);
  Tensor x = rand({5, 2, 3}, DType::f64).set_requires_grad(true);
  // The fused gate kernels have no recorded backward: refused, naming the fix.
  const std::string message =
      thrown([&] { grad({sum(lstm.forward(x).output)}, {x}, {.create_graph = true}); });
  CHECK(message.find("op 'lstm_sequence'") != std::string::npos);
  CHECK(message.find("gate_math = GateMath::composed") != std::string::npos);
  lstm.gate_math = GateMath::composed;  // the same values through recorded ops
  Tensor g = grad({sum(lstm.forward(x).output)}, {x}, {.create_graph = true})[0];
  CHECK(g.requires_grad());
  Tensor gg = grad({sum(g)}, {x})[0];
  CHECK(gg.shape() == x.shape());
}

TEST_CASE("idiom: torch.optim.SGD(model.parameters(), 0.1, 0.9)  # positional lr, then momentum") {
  Module model(DType::f64);
  model.register_parameter("w", Tensor::ones({2}, DType::f64));
  SGD opt(model, 0.1, 0.9);
  REQUIRE(opt.param_groups().size() == 1);
  CHECK(opt.param_groups()[0].lr == 0.1);
  model.parameter("w").grad().fill(1.0);
  opt.step();  // w − lr·g = 0.9 (no momentum buffer yet)
  CHECK(model.parameter("w").to_vector() == std::vector<double>{0.9, 0.9});
  // torch's CosineAnnealingLR(opt, T_max, eta_min) would be read as a warm-up count: refused.
  static_assert(!std::is_constructible_v<CosineAnnealingLR, Optimizer&, int64_t, double>);
  static_assert(std::is_constructible_v<CosineAnnealingLR, Optimizer&, int64_t, int64_t, double>);
}
