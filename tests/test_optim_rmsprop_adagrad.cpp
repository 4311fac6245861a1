// RMSprop and Adagrad against torch 1.13 (float64 goldens from tools/torch_goldens_optim.py, every
// option on in one case or another), the flat path against the tensor path bit for bit, two
// ZeRO-1 shards against the whole buffer, the version bump on the parameters they write, and the
// refusal of bad settings and parameters, naming them. The Trainer's exact resume with both is in
// tests/test_trainer_optimizers.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"
#include "train/optim.h"

using namespace dg;

namespace {
// The parameters and gradients of tools/torch_goldens_optim.py: w [2, 2] and b [3], three steps.
const std::vector<double> kW0{0.5, -1.0, 2.0, 0.25}, kB0{0.1, -0.2, 0.3};
const std::vector<double> kGW[3] = {
    {0.3, -0.1, 0.05, 1.0}, {-0.2, 0.6, 0.1, 0.0}, {0.4, -0.7, 0.25, -0.5}};
const std::vector<double> kGB[3] = {{-0.4, 0.2, 0.7}, {0.3, -0.5, 0.2}, {-0.1, 0.9, -0.3}};

// Printed by tools/torch_goldens_optim.py (w flattened, then b, after three steps).
const std::vector<double> kTorchRmspropPlain{
    0.381102738390707,   -0.923002600293086,   1.7190896527853394, 0.19508165511854186,
    0.12978726768549784, -0.24651433743715367, 0.25540791913311245};
const std::vector<double> kTorchRmspropMomentum{
    0.4217296333916789,  -0.9494650940716798,  1.8538690032779284, 0.18617442807893142,
    0.14859106977783795, -0.25148776150678803, 0.21954554242244106};
const std::vector<double> kTorchRmspropCentered{
    0.3802984889891071, -0.922816850399155,   1.7167903451008886, 0.19462017011020177,
    0.2201637107639851, -0.38705537719555094, 0.12041592453774244};
const std::vector<double> kTorchRmspropCenteredMomentum{
    0.4230546948238802, -0.952906538437323,  1.813255458254604,  0.19060689511405254,
    0.1469508162212504, -0.2553047658835975, 0.21643448704638543};
const std::vector<double> kTorchAdagradPlain{
    0.38119188438344404, -0.9231564512327307,  1.719270188295814, 0.1947213595559958,
    0.12980580674848616, -0.24648198195131849, 0.2553139626617699};
const std::vector<double> kTorchAdagradAll{
    0.4258772513649783,  -0.9694084764316964,  1.888001554898338,  0.177267200943027,
    0.14422444723831737, -0.23267334237475124, 0.21668924687968044};

struct TwoTensors {
  Tensor w = Tensor::from_vector(kW0, {2, 2}, DType::f64).set_requires_grad(true);
  Tensor b = Tensor::from_vector(kB0, {3}, DType::f64).set_requires_grad(true);
  std::vector<double> three_steps(Optimizer& opt) {
    for (int t = 0; t < 3; ++t) {
      w.set_grad(Tensor::from_vector(kGW[t], {2, 2}, DType::f64));
      b.set_grad(Tensor::from_vector(kGB[t], {3}, DType::f64));
      opt.step();
    }
    std::vector<double> out = w.to_vector(), bv = b.to_vector();
    out.insert(out.end(), bv.begin(), bv.end());
    return out;
  }
};

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-13));
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

// A float32 module big enough for the parallel chunks (three slots), with fixed values and a
// gradient per step.
struct Wide : Module {
  Wide() : Module(DType::f32) {
    w = register_parameter("w", Tensor::zeros({200, 300}, DType::f32));
    g = register_parameter("g", Tensor::zeros({300}, DType::f32));
    b = register_parameter("b", Tensor::zeros({301}, DType::f32));
    FlatParameters& flat = flat_parameters();
    float* p = flat.values.data<float>();
    for (int64_t i = 0; i < flat.total; ++i) p[i] = static_cast<float>(std::sin(0.37 * i));
  }
  void set_grads(int step) {
    FlatParameters& flat = flat_parameters();
    float* gr = flat.gradients.data<float>();
    for (int64_t i = 0; i < flat.total; ++i) gr[i] = static_cast<float>(std::cos(0.11 * i + step));
  }
  // Parameter by parameter (the flat buffer's padding between slots is no parameter's).
  std::vector<float> values() const {
    std::vector<float> out;
    for (const Tensor& t : {w, g, b}) {
      const std::vector<float> v = t.to_floats();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  Tensor w, g, b;
};

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Three steps of `make(model)` over the whole flat buffer, over the tensors, and as two ZeRO-1
// shards that split the buffer: all the same bits.
void check_paths_agree(const std::function<std::unique_ptr<FlatOptimizer>(Wide&)>& over_flat,
                       const std::function<std::unique_ptr<Optimizer>(Wide&)>& over_tensors) {
  Wide whole, listed, sharded;
  auto a = over_flat(whole);
  auto b = over_tensors(listed);
  auto first = over_flat(sharded), second = over_flat(sharded);
  const int64_t total = sharded.flat_parameters().total, cut = 12345;
  first->shard(0, cut);
  second->shard(cut, total);
  for (int step = 0; step < 3; ++step) {
    for (Wide* m : {&whole, &listed, &sharded}) m->set_grads(step);
    a->step();
    b->step();
    first->step();
    second->step();
  }
  CHECK(same_bits(whole.values(), listed.values()));
  CHECK(same_bits(whole.values(), sharded.values()));
  CHECK(whole.values() != Wide().values());
}
}  // namespace

TEST_CASE("RMSprop matches torch over parameter groups (weight decay, momentum, centered)") {
  {
    TwoTensors t;
    RMSprop opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.005}}, RMSpropConfig{});
    check_close(t.three_steps(opt), kTorchRmspropPlain);
  }
  {
    TwoTensors t;
    RMSprop opt({{.params = {t.w}}, {.params = {t.b}, .weight_decay = 0.0}},
                RMSpropConfig{.alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1, .momentum = 0.8});
    check_close(t.three_steps(opt), kTorchRmspropMomentum);
  }
  {
    TwoTensors t;
    RMSprop opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.02}},
                RMSpropConfig{.centered = true});
    check_close(t.three_steps(opt), kTorchRmspropCentered);
  }
  {
    TwoTensors t;
    RMSprop opt(
        {{.params = {t.w}, .weight_decay = 0.0}, {.params = {t.b}}},
        RMSpropConfig{.alpha = 0.95, .weight_decay = 0.05, .momentum = 0.5, .centered = true});
    check_close(t.three_steps(opt), kTorchRmspropCenteredMomentum);
  }
}

TEST_CASE("Adagrad matches torch over parameter groups (lr_decay, weight decay, initial sum)") {
  {
    TwoTensors t;
    Adagrad opt({{.params = {t.w}}, {.params = {t.b}, .lr = 0.05}}, AdagradConfig{.lr = 0.1});
    check_close(t.three_steps(opt), kTorchAdagradPlain);
  }
  {
    TwoTensors t;
    Adagrad opt({{.params = {t.w}}, {.params = {t.b}, .weight_decay = 0.0}},
                AdagradConfig{.lr = 0.1,
                              .lr_decay = 0.5,
                              .weight_decay = 0.1,
                              .initial_accumulator_value = 0.2,
                              .eps = 1e-6});
    check_close(t.three_steps(opt), kTorchAdagradAll);
  }
}

TEST_CASE("RMSprop and Adagrad: flat buffer, tensors and two ZeRO-1 shards give the same bits") {
  const RMSpropConfig rms{.lr = 1e-3, .weight_decay = 0.01, .momentum = 0.9, .centered = true};
  check_paths_agree([&](Wide& m) { return std::make_unique<RMSprop>(m, rms); },
                    [&](Wide& m) { return std::make_unique<RMSprop>(m.parameters(), rms); });
  const AdagradConfig ada{
      .lr = 0.05, .lr_decay = 0.1, .weight_decay = 0.01, .initial_accumulator_value = 0.1};
  check_paths_agree([&](Wide& m) { return std::make_unique<Adagrad>(m, ada); },
                    [&](Wide& m) { return std::make_unique<Adagrad>(m.parameters(), ada); });
}

TEST_CASE("RMSprop and Adagrad name their state, bump the parameters' version, skip no-grad ones") {
  Wide m;
  RMSprop rms(m, RMSpropConfig{.momentum = 0.5, .centered = true});
  std::vector<std::string> names;
  for (const auto& [name, tensor] : rms.element_state()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"square_avg", "momentum_buffer", "grad_avg"});
  RMSprop plain(m, RMSpropConfig{});
  CHECK(plain.element_state().size() == 1);
  Adagrad ada(m, AdagradConfig{.initial_accumulator_value = 0.25});
  CHECK(ada.element_state()[0].first == "sum");
  CHECK(ada.element_state()[0].second.to_floats()[7] == 0.25f);

  m.set_grads(0);
  const uint64_t before = m.w.version();
  rms.step();
  CHECK(m.w.version() > before);
  const uint64_t after_rms = m.w.version();
  ada.step();
  CHECK(m.w.version() > after_rms);
  CHECK(rms.scalar_state().at("step") == 1);
  CHECK(ada.scalar_state().at("step") == 1);

  // Over tensors, one without a gradient is skipped (torch): it neither moves nor counts a step.
  TwoTensors t;
  Adagrad by_tensor({t.w, t.b}, AdagradConfig{.lr = 0.1, .lr_decay = 1.0});
  t.w.set_grad(Tensor::from_vector(kGW[0], {2, 2}, DType::f64));
  by_tensor.step();
  CHECK(t.b.to_vector() == kB0);
  CHECK(t.w.to_vector() != kW0);
}

TEST_CASE("RMSprop and Adagrad refuse bad settings and parameters, naming them") {
  TwoTensors t;
  CHECK(thrown([&] { RMSprop({t.w}, RMSpropConfig{.alpha = 1.5}); }) ==
        "RMSprop: alpha must be in [0, 1], got 1.5");
  CHECK(thrown([&] { RMSprop({t.w}, RMSpropConfig{.eps = -1}); }) ==
        "RMSprop: eps must be finite and >= 0, got -1");
  CHECK(thrown([&] { RMSprop({t.w}, RMSpropConfig{.momentum = -0.5}); }) ==
        "RMSprop: momentum must be finite and >= 0, got -0.5");
  CHECK(thrown([&] { Adagrad({t.w}, AdagradConfig{.lr_decay = -0.1}); }) ==
        "Adagrad: lr_decay must be finite and >= 0, got -0.1");
  CHECK(thrown([&] { Adagrad({t.w}, AdagradConfig{.initial_accumulator_value = -1}); }) ==
        "Adagrad: initial_accumulator_value must be finite and >= 0, got -1");
  Wide m;
  CHECK(thrown([&] { Adagrad(m, AdagradConfig{.lr = NAN}); }) ==
        "Adagrad: lr must be finite and >= 0, got nan");
  Tensor made = scale(t.w, 2.0).set_name("scaled");
  Tensor frozen = Tensor::zeros({4}, DType::f64).set_name("frozen");
  CHECK(thrown([&] {
          RMSprop({t.b, made}, RMSpropConfig{});
        })
            .find("RMSprop: parameter 1 of "
                  "group 0, 'scaled'") != std::string::npos);
  CHECK(thrown([&] { Adagrad({frozen}, AdagradConfig{}); }).find("does not require grad") !=
        std::string::npos);
  CHECK(thrown([&] {
          RMSprop({t.w, t.w}, RMSpropConfig{});
        }).find("more than one place") != std::string::npos);
}
