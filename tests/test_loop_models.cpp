// The training loop's guarantees on models that are not a MicroLM (an MLP built from public
// modules, over a TensorDataset): resume bit for bit (dropout's draws included), N ranks equal to
// accumulation over N micro-batches byte for byte, ZeRO-1 changing no bit, a checkpoint moving
// between layouts, stopping by signal and resuming, divergence named by step and tensor.
// The same guarantees on a MicroLM: tests/test_trainer.cpp, tests/test_data_parallel.cpp,
// tests/test_stop.cpp; over real MPI ranks: tests/mpi_train.sh.
#include <doctest/doctest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "tensor/factory.h"
#include "tensor/gemm_kernels.h"
#include "tests/loop_test_models.h"
#include "tests/temp_dir.h"
#include "tests/thread_ranks.h"
#include "train/stop.h"
#include "train/trainer.h"

using namespace dg;
using dg::test::TempDir;

namespace {
using loop_test::make_mlp;

// 60 examples: x [60, 3], y [60, 2] a smooth function of x.
TensorDataset regression_data() {
  TorchGenerator g(11);
  const Tensor x = randn({60, 3}, DType::f32, &g);
  const Tensor y = Tensor::from_vector(
      [&] {
        std::vector<float> v;
        const float* p = x.data<float>();
        for (int64_t i = 0; i < 60; ++i) {
          v.push_back(std::sin(p[3 * i]) + 0.5f * p[3 * i + 1]);
          v.push_back(p[3 * i + 2] * p[3 * i]);
        }
        return v;
      }(),
      {60, 2});
  return TensorDataset({x, y});
}

Tensor mse(Sequential& model, const Batch& b) { return mse_loss(model.forward(b[0]), b[1]); }

TrainingConfig settings(int64_t steps, int64_t batch, int64_t accum = 1) {
  TrainingConfig c;
  c.steps = steps;
  c.batch = batch;
  c.accum = accum;
  c.clip = 1.0;
  c.seed = 5;
  return c;
}

// AdamW at 3e-3 over `net`, kept alive to the end of the tests (the trainers refer to it). Ranks
// make theirs from threads at once.
FlatOptimizer& adamw(Module& net) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<FlatOptimizer>> kept;
  std::lock_guard<std::mutex> lock(mutex);
  kept.push_back(std::make_unique<AdamW>(net, AdamWConfig{.lr = 3e-3}));
  return *kept.back();
}

std::vector<float> weights(Trainer& t) { return t.parameters().values.to_floats(); }

json::Value mlp_config(double dropout) {
  json::Value v;
  v["kind"] = "mlp";
  v["dropout"] = dropout;
  return v;
}
}  // namespace

TEST_CASE("an MLP with dropout resumes from its checkpoint bit for bit") {
  TempDir dir("loop_models");
  const TensorDataset data = regression_data();
  const TrainingConfig c = settings(12, 8);
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 3, /*drop_last=*/false); };

  manual_seed(100);  // dropout's draws come from the default generator
  auto whole_net = make_mlp(1, 0.2);
  Trainer whole(*whole_net, data, sampler(), mse, c, adamw(*whole_net), nullptr, mlp_config(0.2));
  whole.run();

  manual_seed(100);
  auto first_net = make_mlp(1, 0.2);
  Trainer first(*first_net, data, sampler(), mse, c, adamw(*first_net), nullptr, mlp_config(0.2));
  first.run(5);  // 40 examples: the checkpoint falls inside the first epoch
  const std::string ckpt = (dir.path / "mlp.safetensors").string();
  first.save_checkpoint(ckpt, {{"note", "user metadata is kept"}});
  manual_seed(999);  // whatever the generator does in between, the checkpoint restores it
  randn({17});

  auto fresh_net = make_mlp(2, 0.2);  // other initial weights: the checkpoint replaces them
  Trainer resumed(*fresh_net, data, sampler(), mse, c, adamw(*fresh_net), nullptr, mlp_config(0.2));
  resumed.load_checkpoint(ckpt);
  CHECK(resumed.step() == 5);
  resumed.run();
  CHECK(resumed.losses() == whole.losses());
  CHECK(weights(resumed) == weights(whole));
  CHECK(load_safetensors(ckpt).metadata.at("note") == "user metadata is kept");

  // The model config, the data stream and the reserved metadata keys are checked.
  auto other_net = make_mlp(1, 0.2);
  Trainer other(*other_net, data, sampler(), mse, c, adamw(*other_net), nullptr, mlp_config(0.3));
  CHECK_THROWS_WITH(other.load_checkpoint(ckpt), doctest::Contains("the checkpoint's 'model'"));
  Trainer reshuffled(*other_net, data, Sampler::shuffled(data.size(), 4, false), mse, c,
                     adamw(*other_net), nullptr, mlp_config(0.2));
  CHECK_THROWS_WITH(reshuffled.load_checkpoint(ckpt),
                    doctest::Contains("the checkpoint's data stream"));
  CHECK_THROWS_WITH(first.save_checkpoint(ckpt, {{"depthgrad.step", "9"}}),
                    doctest::Contains("reserved"));
}

TEST_CASE("an MLP in bf16 precision: close to float32, and resumed only in bf16") {
  if (!bf16_unsupported_reason().empty()) {
    TrainingConfig c = settings(2, 8);
    c.precision = MatmulPrecision::bf16;
    const TensorDataset data = regression_data();
    auto net = make_mlp(1, 0.0);
    CHECK_THROWS_WITH(Trainer(*net, data, Sampler::random(data.size(), 1), mse, c, adamw(*net)),
                      doctest::Contains("training.precision bf16"));
    return;
  }
  TempDir dir("loop_models");
  const TensorDataset data = regression_data();
  TrainingConfig c16 = settings(8, 8);
  c16.precision = MatmulPrecision::bf16;
  auto net32 = make_mlp(1, 0.0), net16 = make_mlp(1, 0.0);
  Trainer t32(*net32, data, Sampler::random(data.size(), 1), mse, settings(8, 8), adamw(*net32),
              nullptr, mlp_config(0));
  Trainer t16(*net16, data, Sampler::random(data.size(), 1), mse, c16, adamw(*net16), nullptr,
              mlp_config(0));
  t32.run();
  t16.run();
  CHECK(matmul_precision() == MatmulPrecision::float32);  // the trainer's scope ended
  for (size_t i = 0; i < t32.losses().size(); ++i) {
    CAPTURE(i);
    CHECK(t16.losses()[i] != t32.losses()[i]);
    CHECK(std::fabs(t16.losses()[i] - t32.losses()[i]) <= 0.02 * std::fabs(t32.losses()[i]));
  }
  const std::string ckpt = (dir.path / "bf16.safetensors").string();
  t16.save_checkpoint(ckpt);
  auto fresh = make_mlp(2, 0.0);
  Trainer as_float32(*fresh, data, Sampler::random(data.size(), 1), mse, settings(8, 8),
                     adamw(*fresh), nullptr, mlp_config(0));
  CHECK_THROWS_WITH(as_float32.load_checkpoint(ckpt),
                    doctest::Contains("'training.precision' (\"bf16\") differs from this run's "
                                      "(\"float32\")"));
  Trainer as_bf16(*fresh, data, Sampler::random(data.size(), 1), mse, c16, adamw(*fresh), nullptr,
                  mlp_config(0));
  as_bf16.load_checkpoint(ckpt);
  CHECK(as_bf16.step() == 8);
}

TEST_CASE("an MLP over 2 ranks equals accumulation of 2 micro-batches, byte for byte; ZeRO-1 too") {
  TempDir dir("loop_models");
  const TensorDataset data = regression_data();
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 8, true); };
  TrainingConfig accumulated_settings = settings(9, 4, 2);
  accumulated_settings.clip = 0.05;  // small: most steps clip, so the clip path is compared too
  auto accumulated_net = make_mlp(1, 0);
  Trainer accumulated(*accumulated_net, data, sampler(), mse, accumulated_settings,
                      adamw(*accumulated_net));
  accumulated.run();
  CHECK(accumulated.clipped_steps() > 0);

  for (int64_t zero : {0, 1}) {
    INFO("zero " << zero);
    TrainingConfig per_rank = settings(9, 4, 1);
    per_rank.clip = 0.05;
    per_rank.zero = zero;
    std::vector<std::shared_ptr<Sequential>> nets{make_mlp(1, 0), make_mlp(1, 0)};
    std::vector<std::vector<double>> losses(2);
    std::vector<std::vector<float>> values(2);
    const std::string ckpt = (dir.path / ("ranks" + std::to_string(zero))).string();
    test::ThreadRanks group(2);
    group.run([&](test::ThreadRanks::Rank& rank) {
      Trainer t(*nets[rank.rank()], data, sampler(), mse, per_rank, adamw(*nets[rank.rank()]),
                nullptr, {}, &rank);
      CHECK(t.global_batch() == 8);
      t.run(4);
      t.save_checkpoint(ckpt);  // the whole moments, gathered from the shards with ZeRO-1
      t.run();
      losses[rank.rank()] = t.losses();
      values[rank.rank()] = weights(t);
    });
    CHECK(losses[0] == accumulated.losses());
    CHECK(values[0] == weights(accumulated));
    CHECK(values[1] == values[0]);

    // The checkpoint of 2 ranks resumes in one process with accumulation 2, and on.
    auto net = make_mlp(3, 0);
    Trainer one(*net, data, sampler(), mse, accumulated_settings, adamw(*net));
    one.load_checkpoint(ckpt);
    one.run();
    CHECK(one.losses() == accumulated.losses());
    CHECK(weights(one) == weights(accumulated));
  }
}

TEST_CASE("bf16 over 2 ranks with ZeRO-2 equals bf16 accumulation: the weight copy follows") {
  if (!bf16_unsupported_reason().empty()) return;
  // Each rank updates its shard and the all-gather writes the rest: the bf16 copy of the
  // weights (tensor/bf16_weights.h) must be rounded again after it, never read stale. The
  // precision is process-wide, so the thread ranks share one outer bf16 scope.
  MatmulPrecisionScope bf16(MatmulPrecision::bf16);
  const TensorDataset data = regression_data();
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 8, true); };
  TrainingConfig accumulated_settings = settings(9, 4, 2);
  accumulated_settings.precision = MatmulPrecision::bf16;
  auto accumulated_net = make_mlp(1, 0);
  Trainer accumulated(*accumulated_net, data, sampler(), mse, accumulated_settings,
                      adamw(*accumulated_net));
  accumulated.run();
  TrainingConfig per_rank = settings(9, 4, 1);
  per_rank.precision = MatmulPrecision::bf16;
  per_rank.zero = 2;
  std::vector<std::shared_ptr<Sequential>> nets{make_mlp(1, 0), make_mlp(1, 0)};
  std::vector<std::vector<double>> losses(2);
  std::vector<std::vector<float>> values(2);
  test::ThreadRanks group(2);
  group.run([&](test::ThreadRanks::Rank& rank) {
    Trainer t(*nets[rank.rank()], data, sampler(), mse, per_rank, adamw(*nets[rank.rank()]),
              nullptr, {}, &rank);
    t.run();
    losses[rank.rank()] = t.losses();
    values[rank.rank()] = weights(t);
  });
  CHECK(losses[0] == accumulated.losses());
  CHECK(values[0] == weights(accumulated));
  CHECK(values[1] == values[0]);
}

TEST_CASE("stopping an MLP's training by signal and resuming gives the uninterrupted run") {
  TempDir dir("loop_models");
  const TensorDataset data = regression_data();
  const TrainingConfig c = settings(10, 6);
  auto whole_net = make_mlp(1, 0);
  Trainer whole(*whole_net, data, Sampler::random(data.size(), 2), mse, c, adamw(*whole_net));
  whole.run();

  const std::string ckpt = (dir.path / "stopped.safetensors").string();
  auto net = make_mlp(1, 0);
  Trainer stopped(*net, data, Sampler::random(data.size(), 2), mse, c, adamw(*net));
  install_stop_handlers();
  try {
    stopped.run(c.steps, [&](const StepLog& log) {
      if (log.step == 3) std::raise(SIGINT);  // as Ctrl-C would, during step 4
      stop_if_requested("after step " + std::to_string(log.step + 1));
    });
    FAIL("the run was not stopped");
  } catch (const Interrupted& e) {
    CHECK(e.signal == SIGINT);
    stopped.save_checkpoint(ckpt);
  }
  clear_stop_request();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  CHECK(stopped.step() == 4);
  auto fresh = make_mlp(7, 0);
  Trainer resumed(*fresh, data, Sampler::random(data.size(), 2), mse, c, adamw(*fresh));
  resumed.load_checkpoint(ckpt);
  resumed.run();
  CHECK(resumed.losses() == whole.losses());
  CHECK(weights(resumed) == weights(whole));
}

TEST_CASE("divergence of an MLP is named by step and tensor; skipping goes on") {
  const TensorDataset data = regression_data();
  const TrainingConfig c = settings(6, 6);
  // From step 3 on, the loss gains sqrt(Σ 0·w) of the last layer's weight: its value is 0, its
  // gradient ∞·0 = NaN for that weight only.
  int64_t calls = 0;
  const std::function<Tensor(Sequential&, const Batch&)> poisoned = [&](Sequential& model,
                                                                        const Batch& b) {
    Tensor loss = mse(model, b);
    if (calls++ >= 3) {
      const Tensor w = model.named_parameters().back().second;
      loss = loss + sqrt(sum(w * 0.0));
    }
    return loss;
  };
  auto net = make_mlp(1, 0);
  Trainer t(*net, data, Sampler::random(data.size(), 2), poisoned, c, adamw(*net));
  t.run(3);
  const std::vector<float> before = weights(t);
  const std::string last = net->named_parameters().back().first;
  CHECK_THROWS_WITH_AS(t.train_step(), doctest::Contains("training diverged at step 3 (0-based)"),
                       TrainingDiverged);
  CHECK(weights(t) == before);  // stopped before the optimizer step

  calls = 0;
  auto clipless_net = make_mlp(1, 0);
  TrainingConfig no_clip = c;
  no_clip.clip = 0;  // without clipping the gradients are searched for the first bad tensor
  Trainer named(*clipless_net, data, Sampler::random(data.size(), 2), poisoned, no_clip,
                adamw(*clipless_net));
  named.run(3);
  CHECK_THROWS_WITH(named.train_step(),
                    doctest::Contains(("the gradient of '" + last + "' is not finite").c_str()));

  calls = 0;
  auto skipping_net = make_mlp(1, 0);
  Trainer skipping(*skipping_net, data, Sampler::random(data.size(), 2), poisoned, c,
                   adamw(*skipping_net));
  skipping.set_skip_nonfinite(true);
  skipping.run();
  CHECK(skipping.step() == 6);
  CHECK(skipping.skipped_steps() == 3);
  CHECK(skipping.losses().size() == 3);
}

TEST_CASE("evaluate_loss averages over every example in eval mode; bad setups are refused") {
  const TensorDataset data = regression_data();
  auto net = make_mlp(1, 0.5);
  const double whole = evaluate_loss(*net, data, mse, 60);
  const double batched = evaluate_loss(*net, data, mse, 7);  // 8 batches of 7, one of 4
  CHECK(batched == doctest::Approx(whole).epsilon(1e-6));
  CHECK(net->is_training());  // restored

  const TrainingConfig c = settings(3, 4);
  CHECK_THROWS_WITH(Trainer(*net, data, Sampler::random(59, 1), mse, c, adamw(*net)),
                    doctest::Contains("covers 59 examples, the dataset has 60"));
  CHECK_THROWS_WITH(Trainer(*net, data, Sampler::random(60, 1),
                            std::function<Tensor(Sequential&, const Batch&)>(), c, adamw(*net)),
                    doctest::Contains("no loss function"));
  Trainer vector_loss(
      *net, data, Sampler::random(60, 1),
      [](Sequential& m, const Batch& b) { return m.forward(b[0]); }, c, adamw(*net));
  CHECK_THROWS_WITH(vector_loss.train_step(), doctest::Contains("expected one value"));
}
