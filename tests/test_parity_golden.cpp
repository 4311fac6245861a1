// Appendix A of tools/attnres/PROTOCOL.md: the reference evaluator run on a synthetic token stream,
// reproduced number for number. Tolerances as the appendix suggests: init weights 1e-7, init
// loss 1e-5, per-step losses 1e-4, final metrics 1e-3 relative.
#include <doctest/doctest.h>
#include <fmt/core.h>

#include <cmath>

#include "autograd/ops.h"
#include "nn/lm/micro_lm.h"
#include "train/lm/micro_lm_training.h"

using namespace dg;

namespace {
struct Synthetic {
  std::vector<int32_t> train, validation;
};
const Synthetic& synthetic() {
  static Synthetic s = [] {
    Synthetic d;
    for (int64_t n = 0; n < 128000; ++n) {
      int32_t x = static_cast<int32_t>((n * n + 3 * n) % 509);
      (n < 120000 ? d.train : d.validation).push_back(x);
    }
    return d;
  }();
  return s;
}

MicroLMConfig reference_config(ResidualMode mode) {
  MicroLMConfig c;  // defaults are the reference micro config (§2.1)
  c.mode = mode;
  return c;
}

struct Golden {
  ResidualMode mode;
  int64_t parameters;
  double init_loss;
  double init_logits[3];
  double init_js;
  double token_w[3];
  double route_w[3];
  double losses[4];  // steps 0, 1, 2, 29
  double norms[4];
  int64_t clipped;
  double initial_loss, final_loss, lm_loss, perplexity, js;
};

const Golden kGolden[] = {
    {residual_mode("block_attnres"),
     139904,
     6.256376266,
     {0.0205539, 0.1039293, 0.1705377},
     0.0,
     {-0.0049796, 0.0322440, 0.0008954},
     {-0.0041371, 0.0379348, -0.0024163},
     {6.245925, 6.182505, 6.155586, 5.196842},
     {0.986198, 1.043052, 0.888445, 0.956554},
     7,
     6.0595592,
     5.3878839,
     5.229638338,
     186.72526,
     0.0},
    {residual_mode("rd_attnres"),
     140096,
     6.283659458,
     {0.0037204, 0.0842095, -0.0474888},
     0.0013135634,
     {0.0232577, -0.0001996, 0.0076574},
     {0.0321990, 0.0182761, -0.0227164},
     {6.252149, 6.206195, 6.159461, 5.185927},
     {0.973213, 1.089006, 0.898163, 0.928614},
     6,
     6.0691332,
     5.4070043,
     5.256771207,
     191.86101,
     0.0018549415},
};

bool close_rel(double a, double b, double rel, double abs_floor = 0) {
  return std::fabs(a - b) <= abs_floor + rel * std::fabs(b);
}
}  // namespace

TEST_CASE("Appendix A: initial weights, loss, logits and JS match the reference") {
  const Synthetic& data = synthetic();
  for (const Golden& g : kGolden) {
    CAPTURE(residual_mode_name(g.mode));
    MicroLM model(reference_config(g.mode));
    CHECK(model.parameter_count() == g.parameters);
    model.init_torch_parity(42);
    for (int i = 0; i < 3; ++i) {
      CHECK(std::fabs(model.parameter("token.weight").at({0, i}) - g.token_w[i]) <= 1e-7);
      CHECK(std::fabs(model.parameter("blocks.1.qk_route.weight").at({0, i}) - g.route_w[i]) <=
            1e-7);
    }
    NoGradGuard no_grad;
    std::vector<int32_t> in(data.validation.begin(), data.validation.begin() + 64);
    std::vector<int32_t> tg(data.validation.begin() + 1, data.validation.begin() + 65);
    Tensor ids = Tensor::from_ids(in, {1, 64}), targets = Tensor::from_ids(tg, {1, 64});
    Tensor logits = model.forward(ids);
    for (int i = 0; i < 3; ++i) CHECK(std::fabs(logits.at({0, 0, i}) - g.init_logits[i]) <= 1e-6);
    double loss =
        cross_entropy(reshape(logits, {64, 512}), dg::raw::view_reshape(targets, {64})).item();
    CHECK(std::fabs(loss - g.init_loss) <= 1e-5);
    CHECK(std::fabs(model.route_stats().js_reference - g.init_js) <= 1e-8);
  }
}

TEST_CASE("Appendix A: 30 training steps, clipping, evaluation and JS match the reference") {
  const Synthetic& data = synthetic();
  for (const Golden& g : kGolden) {
    CAPTURE(residual_mode_name(g.mode));
    RunConfig run;  // defaults are the reference's: 30 steps, batch 4, lr 6e-4, clip 1, seed 42, 32
                    // windows
    run.model = reference_config(g.mode);
    ArmResult r = train_and_evaluate(residual_mode_name(g.mode), run, data.train, data.validation);
    REQUIRE(r.losses.size() == 30);
    const int steps[4] = {0, 1, 2, 29};
    for (int i = 0; i < 4; ++i) {
      CAPTURE(steps[i]);
      CHECK(std::fabs(r.losses[steps[i]] - g.losses[i]) <= 1e-4);
      CHECK(close_rel(r.grad_norms[steps[i]], g.norms[i], 1e-3));
    }
    CHECK(r.clipped_steps == g.clipped);
    CHECK(std::fabs(r.initial_loss - g.initial_loss) <= 1e-4);
    CHECK(std::fabs(r.final_loss - g.final_loss) <= 1e-4);
    CHECK(close_rel(r.lm_loss, g.lm_loss, 1e-3));
    CHECK(close_rel(r.perplexity, g.perplexity, 1e-3));
    CHECK(close_rel(r.train_routes.js_reference, g.js, 1e-3, 1e-9));
    MESSAGE(fmt::format(
        "{}: loss[29] {:.6f} (ref {:.6f}) lm_loss {:.9f} (ref {:.9f}) ppl {:.5f} (ref {:.5f}) JS "
        "{:.10f} (ref {:.10f}) clipped {}",
        residual_mode_name(g.mode), r.losses[29], g.losses[3], r.lm_loss, g.lm_loss, r.perplexity,
        g.perplexity, r.train_routes.js_reference, g.js, r.clipped_steps));
  }
}
