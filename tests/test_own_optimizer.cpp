// train/README.md's "Write your own optimiser", compiled and run: the optimiser between the
// README markers below is the README's code block, character for character (the last test case
// compares them), so the README's example fails here if it stops compiling, stops training, or
// stops getting groups, the flat buffer and ZeRO shards from ElementwiseOptimizer.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/layers.h"
#include "tensor/rng.h"
#include "train/optim.h"

namespace {

// ---- README begin
// Sign descent with momentum: m ← β·m + (1 − β)·g, then p ← p·(1 − lr·wd) − lr·sign(m).
struct SignMomentumConfig {
  double lr = 1e-3;
  double beta = 0.9;
  double weight_decay = 0;
};

class SignMomentum : public dg::ElementwiseOptimizer {
 public:
  SignMomentum(dg::Module& model, const SignMomentumConfig& config)
      : ElementwiseOptimizer(model.flat_parameters(), config.lr, config.weight_decay,
                             "SignMomentum"),
        config_(config) {}
  SignMomentum(std::vector<dg::ParamGroup> groups, const SignMomentumConfig& config)
      : ElementwiseOptimizer(std::move(groups), config.lr, config.weight_decay, "SignMomentum"),
        config_(config) {}
  std::string name() const override { return "SignMomentum"; }  // in checkpoints and errors

 protected:
  // One state tensor per element, "momentum", starting at 0: checkpoints store it per parameter
  // as optimizer.momentum.<name>, and ZeRO-1 cuts it over the ranks.
  std::vector<StateTensor> state_layout() const override { return {{"momentum", 0.0}}; }
  void update(const dg::UpdateSpan<float>& span) const override { sign_step(span); }
  void update(const dg::UpdateSpan<double>& span) const override { sign_step(span); }

 private:
  // span.n elements: parameters p, gradients g, state[0] their momentum; the group's lr and
  // weight_decay at this step; span.step counts this state's updates from 1.
  template <class T>
  void sign_step(const dg::UpdateSpan<T>& span) const {
    const T beta = static_cast<T>(config_.beta), rate = static_cast<T>(span.lr),
            decay = static_cast<T>(1.0 - span.lr * span.weight_decay);
    T* m = span.state[0];
    for (int64_t i = 0; i < span.n; ++i) {
      m[i] = beta * m[i] + (T(1) - beta) * span.g[i];
      span.p[i] = span.p[i] * decay - rate * static_cast<T>((m[i] > 0) - (m[i] < 0));
    }
  }
  SignMomentumConfig config_;
};
// ---- README end

// A 1 -> 16 -> 1 tanh network fitting sin(x) on 32 points of [-2, 2]; the loss before the first
// step and after the last.
std::pair<double, double> fit_sine(int64_t steps) {
  dg::manual_seed(0);
  dg::Module model;
  const dg::Linear& hidden = model.register_module("hidden", std::make_unique<dg::Linear>(1, 16));
  const dg::Linear& out = model.register_module("out", std::make_unique<dg::Linear>(16, 1));
  std::vector<double> xs(32), ys(32);
  for (int i = 0; i < 32; ++i) {
    xs[i] = -2.0 + 4.0 * i / 31;
    ys[i] = std::sin(xs[i]);
  }
  const dg::Tensor x = dg::Tensor::from_vector(xs, {32, 1}),
                   y = dg::Tensor::from_vector(ys, {32, 1});
  SignMomentum optimizer(model, {.lr = 3e-3, .beta = 0.9});
  double first = 0, last = 0;
  for (int64_t step = 0; step <= steps; ++step) {
    model.zero_grad();
    const dg::Tensor loss = dg::mse_loss(out.forward(dg::tanh(hidden.forward(x))), y);
    last = loss.item();
    if (step == 0) first = last;
    if (step == steps) break;
    dg::backward(loss);
    optimizer.step();
  }
  return {first, last};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("the README's own optimiser trains a small network") {
  const std::pair<double, double> fit = fit_sine(400);  // not a structured binding: INFO
  const double first = fit.first, last = fit.second;    // captures, which clang 14 refuses
  INFO("mean squared error from " << first << " to " << last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.02);
  CHECK(last < first / 10);
}

TEST_CASE("the README's own optimiser: groups, the flat buffer and ZeRO shards give one update") {
  const std::vector<double> start = {0.5, -1.0, 0.25, 2.0, -0.75, 1.5, 0.125, -0.5};
  auto gradient = [](int64_t t) {
    std::vector<double> g(8);
    for (int64_t i = 0; i < 8; ++i) g[i] = static_cast<double>((i * 3 + t * 5) % 7 - 3) * 0.25;
    return g;
  };
  const SignMomentumConfig config{.lr = 0.1, .beta = 0.5, .weight_decay = 0.2};
  // Over a tensor (its own state), over the flat buffer, and over the flat buffer in two shards.
  dg::Tensor w = dg::Tensor::from_vector(start, {8});
  w.set_requires_grad(true);
  SignMomentum over_tensor(std::vector<dg::ParamGroup>{{{w}}}, config);
  dg::Module whole_model, sharded_model;
  const dg::Tensor whole = whole_model.register_parameter("w", dg::Tensor::from_vector(start, {8}));
  const dg::Tensor cut = sharded_model.register_parameter("w", dg::Tensor::from_vector(start, {8}));
  SignMomentum flat(whole_model, config), low(sharded_model, config), high(sharded_model, config);
  low.shard(0, 3);
  high.shard(3, 8);
  for (int64_t t = 0; t < 4; ++t) {
    w.set_grad(dg::Tensor::from_vector(gradient(t), {8}));
    whole.grad().copy_from(dg::Tensor::from_vector(gradient(t), {8}));
    cut.grad().copy_from(dg::Tensor::from_vector(gradient(t), {8}));
    over_tensor.step();
    flat.step();
    low.step();
    high.step();
  }
  CHECK(w.to_floats() == whole.to_floats());
  CHECK(cut.to_floats() == whole.to_floats());
  CHECK(flat.element_state().at(0).first == "momentum");
  CHECK(flat.scalar_state().at("step") == 4);
  CHECK(w.to_floats() != dg::Tensor::from_vector(start, {8}).to_floats());
}

TEST_CASE("train/README.md shows the optimiser of tests/test_own_optimizer.cpp, line for line") {
  const std::string test = read_text(std::string(DG_SOURCE_DIR) + "/tests/test_own_optimizer.cpp");
  const std::string readme = read_text(std::string(DG_SOURCE_DIR) + "/train/README.md");
  const std::string begin_mark = "// ---- README begin\n", end_mark = "// ---- README end\n";
  const size_t b = test.find(begin_mark) + begin_mark.size(), e = test.find(end_mark);
  REQUIRE(e != std::string::npos);
  const std::string code = test.substr(b, e - b);
  const std::string heading = "### Write your own optimiser";
  const size_t section = readme.find(heading);
  REQUIRE_MESSAGE(section != std::string::npos, "train/README.md has no '" << heading << "'");
  const size_t open = readme.find("```cpp\n", section);
  REQUIRE(open != std::string::npos);
  const size_t close = readme.find("```\n", open + 7);
  REQUIRE(close != std::string::npos);
  const std::string shown = readme.substr(open + 7, close - open - 7);
  CHECK_MESSAGE(shown == code,
                "the README's code block differs from the test's: copy the block between the "
                "README markers of tests/test_own_optimizer.cpp into train/README.md");
}
