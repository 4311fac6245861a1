// The Trainer with an optimiser made from parameter groups (weight_decay_groups: no weight decay
// on biases, the usual grouping) and with a DataLoader in torch's epoch order:
//  - groups: the Trainer's steps equal a hand-written loop over the same optimiser on the tensors
//    (each group's own rate and decay), bit for bit; a checkpoint half-way resumes bit for bit
//    for every optimiser, with a SequentialLR schedule; ZeRO-0, 1 and 2 over 2 ranks equal
//    accumulation 2 bit for bit; a checkpoint's groups are checked on resume; a tensor outside the
//    model and an optimiser that has stepped are refused, naming them.
//  - loader: the Trainer takes the loader's batches in order (the short last batch of an epoch
//    as a step of its own), and resumes mid-epoch bit for bit; a short batch with accumulation
//    and a batch size other than the step's are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "tensor/factory.h"
#include "tests/loop_test_models.h"
#include "tests/temp_dir.h"
#include "tests/thread_ranks.h"
#include "train/trainer.h"

using namespace dg;
using dg::test::TempDir;
using loop_test::make_mlp;

namespace {
TensorDataset regression_data() {
  TorchGenerator g(11);
  const Tensor x = randn({60, 3}, DType::f32, &g);
  std::vector<float> y;
  const float* p = x.data<float>();
  for (int64_t i = 0; i < 60; ++i) {
    y.push_back(std::sin(p[3 * i]) + 0.5f * p[3 * i + 1]);
    y.push_back(p[3 * i + 2] * p[3 * i]);
  }
  return TensorDataset({x, Tensor::from_vector(y, {60, 2})});
}

Tensor mse(Sequential& net, const Batch& b) { return mse_loss(net.forward(b[0]), b[1]); }

TrainingConfig settings(int64_t steps, int64_t batch, int64_t accum = 1) {
  TrainingConfig c;
  c.steps = steps;
  c.batch = batch;
  c.accum = accum;
  c.seed = 5;
  return c;
}

std::vector<float> weights(Trainer& t) { return t.parameters().values.to_floats(); }

enum class Kind { adamw, adam, sgd, rmsprop, adagrad };

// An optimiser of `kind` over the decay / no-decay groups of `net`, group 1 at a third of the
// rate, and a SequentialLR (linear warm-up, then exponential decay) over it.
struct Grouped {
  std::unique_ptr<FlatOptimizer> optimizer;
  std::unique_ptr<LinearLR> warm;
  std::unique_ptr<ExponentialLR> decay;
  std::unique_ptr<SequentialLR> schedule;
};
Grouped grouped(Kind kind, Module& net, bool schedule = true) {
  std::vector<ParamGroup> groups = weight_decay_groups(net, 0.05);
  groups[1].lr = 1e-3;
  Grouped g;
  switch (kind) {
    case Kind::adamw:
      g.optimizer = std::make_unique<AdamW>(groups, AdamWConfig{.lr = 3e-3});
      break;
    case Kind::adam:
      g.optimizer = std::make_unique<Adam>(groups, AdamConfig{.lr = 3e-3});
      break;
    case Kind::sgd:
      g.optimizer = std::make_unique<SGD>(groups, SGDConfig{.lr = 0.05, .momentum = 0.9});
      break;
    case Kind::rmsprop:
      g.optimizer = std::make_unique<RMSprop>(groups, RMSpropConfig{.lr = 1e-3, .momentum = 0.5});
      break;
    case Kind::adagrad:
      g.optimizer = std::make_unique<Adagrad>(groups, AdagradConfig{.lr = 0.05});
      break;
  }
  if (schedule) {
    g.warm = std::make_unique<LinearLR>(*g.optimizer, 0.25, 1.0, 3);
    g.decay = std::make_unique<ExponentialLR>(*g.optimizer, 0.9);
    g.schedule = std::make_unique<SequentialLR>(
        *g.optimizer, std::vector<LrScheduler*>{g.warm.get(), g.decay.get()},
        std::vector<int64_t>{3});
  }
  return g;
}
}  // namespace

TEST_CASE("weight_decay_groups splits by dimension: matrices decay, biases do not") {
  auto net = make_mlp(1, 0);
  const std::vector<ParamGroup> groups = weight_decay_groups(*net, 0.1);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params.size() == 3);  // the three Linear weights
  CHECK(groups[1].params.size() == 3);  // their biases
  for (const Tensor& p : groups[0].params) CHECK(p.dim() == 2);
  for (const Tensor& p : groups[1].params) CHECK(p.dim() == 1);
  CHECK(*groups[0].weight_decay == 0.1);
  CHECK(*groups[1].weight_decay == 0.0);
}

TEST_CASE("Trainer with parameter groups equals a hand-written loop over the same groups") {
  const TensorDataset data = regression_data();
  for (Kind kind : {Kind::adamw, Kind::sgd, Kind::adagrad}) {
    CAPTURE(static_cast<int>(kind));
    auto net = make_mlp(1, 0);
    Grouped g = grouped(kind, *net);
    Trainer trainer(*net, data, Sampler::shuffled(data.size(), 3, false), mse, settings(8, 8),
                    *g.optimizer, g.schedule.get());
    trainer.run();
    CHECK(g.optimizer->flat_parameters() != nullptr);  // moved onto the flat buffer

    // The same steps by hand: the optimiser over the tensors (per-tensor state), not the flat
    // buffer; the same groups, rates and schedule.
    auto twin = make_mlp(1, 0);
    Grouped h = grouped(kind, *twin);
    Sampler sampler = Sampler::shuffled(data.size(), 3, false);
    std::vector<int64_t> indices;
    Batch batch;
    std::vector<double> losses;
    for (int step = 0; step < 8; ++step) {
      sampler.next(8, indices);
      data.fill(indices, batch);
      h.optimizer->zero_grad();
      Tensor loss = mse(*twin, batch);
      losses.push_back(loss.item());
      backward(loss);
      h.optimizer->step();
      h.schedule->step();
    }
    CHECK(h.optimizer->flat_parameters() == nullptr);
    CHECK(trainer.losses() == losses);
    std::vector<float> by_hand;
    for (const FlatParameters::Slot& slot : net->flat_parameters().slots) {
      const std::vector<double> v = twin->parameter(slot.name).to_vector();
      const std::vector<double> w = net->parameter(slot.name).to_vector();
      CHECK(v == w);
    }
  }
}

TEST_CASE("Trainer with parameter groups resumes half-way to the same bits, every optimiser") {
  const TensorDataset data = regression_data();
  TempDir dir("trainer_groups");
  for (Kind kind : {Kind::adamw, Kind::adam, Kind::sgd, Kind::rmsprop, Kind::adagrad}) {
    CAPTURE(static_cast<int>(kind));
    const auto sampler = [&] { return Sampler::shuffled(data.size(), 3, false); };
    TrainingConfig c = settings(10, 8);
    c.clip = 0.5;
    auto whole_net = make_mlp(1, 0);
    Grouped w = grouped(kind, *whole_net);
    Trainer whole(*whole_net, data, sampler(), mse, c, *w.optimizer, w.schedule.get());
    whole.run();

    auto first_net = make_mlp(1, 0);
    Grouped f = grouped(kind, *first_net);
    Trainer first(*first_net, data, sampler(), mse, c, *f.optimizer, f.schedule.get());
    first.run(4);
    const std::string ckpt = (dir.path / "half.safetensors").string();
    first.save_checkpoint(ckpt);

    auto fresh_net = make_mlp(2, 0);
    Grouped r = grouped(kind, *fresh_net);
    Trainer resumed(*fresh_net, data, sampler(), mse, c, *r.optimizer, r.schedule.get());
    resumed.load_checkpoint(ckpt);
    CHECK(r.optimizer->lr(0) == f.optimizer->lr(0));
    CHECK(r.optimizer->lr(1) == f.optimizer->lr(1));
    resumed.run();
    CHECK(resumed.losses() == whole.losses());
    CHECK(weights(resumed) == weights(whole));

    // The checkpoint's groups are checked: an optimiser made from the module is refused.
    auto other_net = make_mlp(2, 0);
    AdamW flat(*other_net, AdamWConfig{});
    Trainer other(*other_net, data, sampler(), mse, c, flat);
    if (kind == Kind::adamw)
      CHECK_THROWS_WITH(other.load_checkpoint(ckpt),
                        doctest::Contains("the checkpoint's optimizer parameter groups"));
  }
}

TEST_CASE("parameter groups over 2 ranks with ZeRO-1 and 2 equal accumulation 2 bit for bit") {
  const TensorDataset data = regression_data();
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 8, true); };
  for (Kind kind : {Kind::adamw, Kind::sgd, Kind::rmsprop, Kind::adagrad}) {
    CAPTURE(static_cast<int>(kind));
    auto net = make_mlp(1, 0);
    Grouped a = grouped(kind, *net);
    Trainer accumulated(*net, data, sampler(), mse, settings(6, 4, 2), *a.optimizer,
                        a.schedule.get());
    accumulated.run();
    for (int64_t zero : {0, 1, 2}) {
      CAPTURE(zero);
      TrainingConfig per_rank = settings(6, 4);
      per_rank.zero = zero;
      std::vector<std::shared_ptr<Sequential>> nets{make_mlp(1, 0), make_mlp(1, 0)};
      std::vector<Grouped> opts;
      for (auto& n : nets) opts.push_back(grouped(kind, *n));
      std::vector<std::vector<float>> values(2);
      std::vector<std::vector<double>> losses(2);
      test::ThreadRanks group(2);
      group.run([&](test::ThreadRanks::Rank& rank) {
        const int r = rank.rank();
        Trainer t(*nets[r], data, sampler(), mse, per_rank, *opts[r].optimizer,
                  opts[r].schedule.get(), {}, &rank);
        t.run();
        losses[r] = t.losses();
        values[r] = weights(t);
      });
      CHECK(losses[0] == accumulated.losses());
      CHECK(values[0] == weights(accumulated));
      CHECK(values[1] == values[0]);
    }
  }
}

TEST_CASE("Trainer refuses groups it cannot move onto the model's flat buffer, naming why") {
  const TensorDataset data = regression_data();
  auto net = make_mlp(1, 0);
  Tensor stray = Tensor::zeros({3}).set_requires_grad(true);
  SGD outside({{.params = {net->parameters()[0]}}, {.params = {stray}}}, SGDConfig{});
  CHECK_THROWS_WITH(
      Trainer(*net, data, Sampler::sequential(data.size()), mse, settings(2, 4), outside),
      doctest::Contains("SGD: parameter 0 of group 1, [3] float32"));
  CHECK_THROWS_WITH(
      Trainer(*net, data, Sampler::sequential(data.size()), mse, settings(2, 4), outside),
      doctest::Contains("is not a parameter of the model being trained"));
  auto other = make_mlp(1, 0);
  AdamW stepped(other->parameters(), AdamWConfig{});
  for (Tensor& p : other->parameters()) p.set_grad(Tensor::zeros(p.shape()));
  stepped.step();
  CHECK_THROWS_WITH(
      Trainer(*other, data, Sampler::sequential(data.size()), mse, settings(2, 4), stepped),
      doctest::Contains("has taken 1 step(s) over its tensors"));
}

TEST_CASE("Trainer over a DataLoader takes its batches in order and resumes mid-epoch exactly") {
  const TensorDataset data = regression_data();  // 60 examples: epochs of 7 × 8 and a 4
  TempDir dir("trainer_groups");
  TorchGenerator g(21);
  const DataLoaderOptions options{.batch_size = 8, .shuffle = true, .generator = &g};
  DataLoader loader(data, options);
  REQUIRE(loader.size() == 8);
  const TrainingConfig c = settings(2 * loader.size(), 8);  // two epochs

  auto whole_net = make_mlp(1, 0);
  SGD whole_opt(*whole_net, SGDConfig{.lr = 0.05, .momentum = 0.9});
  Trainer whole(*whole_net, loader, mse, c, whole_opt);
  whole.run();

  // The same batches by hand: two range-for epochs over the loader.
  auto twin = make_mlp(1, 0);
  SGD twin_opt(*twin, SGDConfig{.lr = 0.05, .momentum = 0.9});
  std::vector<double> losses;
  std::vector<int64_t> sizes;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (const Batch& batch : loader) {
      twin_opt.zero_grad();
      Tensor loss = mse(*twin, batch);
      losses.push_back(loss.item());
      sizes.push_back(batch.size());
      backward(loss);
      twin_opt.step();
    }
  CHECK(sizes == std::vector<int64_t>{8, 8, 8, 8, 8, 8, 8, 4, 8, 8, 8, 8, 8, 8, 8, 4});
  CHECK(whole.losses() == losses);
  CHECK(whole_net->flat_parameters().values.to_floats() ==
        twin->flat_parameters().values.to_floats());

  for (int64_t half : {5, 11}) {  // mid-epoch in the first and in the second epoch
    CAPTURE(half);
    auto first_net = make_mlp(1, 0);
    SGD first_opt(*first_net, SGDConfig{.lr = 0.05, .momentum = 0.9});
    Trainer first(*first_net, DataLoader(data, options), mse, c, first_opt);
    first.run(half);
    const std::string ckpt = (dir.path / "mid.safetensors").string();
    first.save_checkpoint(ckpt);
    auto fresh_net = make_mlp(2, 0);
    SGD fresh_opt(*fresh_net, SGDConfig{.lr = 0.05, .momentum = 0.9});
    Trainer resumed(*fresh_net, DataLoader(data, options), mse, c, fresh_opt);
    resumed.load_checkpoint(ckpt);
    resumed.run();
    CHECK(resumed.losses() == whole.losses());
    CHECK(weights(resumed) == weights(whole));
  }

  auto net = make_mlp(1, 0);
  SGD opt(*net, SGDConfig{});
  CHECK_THROWS_WITH(Trainer(*net, loader, mse, settings(4, 4, 2), opt),
                    doctest::Contains("cannot be split over 1 rank(s) x 'training.accum' 2"));
  CHECK_THROWS_WITH(Trainer(*net, loader, mse, settings(4, 6), opt),
                    doctest::Contains("the DataLoader's batch_size is 8, the step's global batch "
                                      "is 6"));
}
