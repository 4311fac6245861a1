// One training loop for any optimiser: SGD with momentum, Adam, RMSprop, Adagrad and a
// user-written optimiser (a sign-SGD with a per-element momentum) drive the Trainer on models that
// are not a MicroLM (an MLP and a classifier with dropout, and the GPT-2 example's decoder): a
// checkpoint half-way resumes in a fresh Trainer to the uninterrupted run's losses and weights bit
// for bit (with a StepLR schedule, or OneCycleLR for RMSprop); accumulation over 2 micro-batches
// equals 2 ranks bit for bit, and ZeRO-1 changes no bit; a checkpoint of one optimiser is refused
// by another, naming both; an optimiser that cannot shard refuses ZeRO-1. ReduceLROnPlateau, fed
// an evaluation every few steps from the step callback, resumes exactly with its state.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <mutex>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "tensor/factory.h"
#include "tests/loop_test_models.h"
#include "tests/temp_dir.h"
#include "tests/thread_ranks.h"
#include "tools/example/gpt2_model.h"
#include "train/trainer.h"

using namespace dg;
using dg::test::TempDir;

namespace {

// A user's optimiser, written against FlatOptimizer only: m ← β·m + (1 − β)·g, p ← p − lr·sign(m),
// with a per-element m and a step count. Its update of an element reads only that element, so it
// shards; `shards` = false plays one that cannot.
class SignSGD final : public FlatOptimizer {
 public:
  SignSGD(Module& model, double lr, bool shards = true)
      : FlatOptimizer(model.flat_parameters(), lr, 0.0, "SignSGD"), shards_(shards) {
    reset_state();
  }
  std::string name() const override { return "SignSGD"; }
  void step() override {
    const float lr = static_cast<float>(this->lr()), beta = 0.9f;
    float* p = params_->values.data<float>();
    const float* g = params_->gradients.data<float>();
    float* m = momentum_.data<float>();
    for (int64_t i = shard_begin_; i < shard_end_; ++i) {
      float& mi = m[i - shard_begin_];
      mi = beta * mi + (1.0f - beta) * g[i];
      p[i] -= lr * static_cast<float>((mi > 0) - (mi < 0));
    }
    ++steps_;
  }
  std::vector<NamedTensor> element_state() override { return {{"momentum", momentum_}}; }
  std::map<std::string, int64_t> scalar_state() const override { return {{"step", steps_}}; }
  void set_scalar_state(const std::map<std::string, int64_t>& scalars) override {
    steps_ = scalars.at("step");
  }
  bool shardable() const override { return shards_; }

 protected:
  void reset_state() override {
    momentum_ = Tensor::zeros({shard_end_ - shard_begin_}, DType::f32);
    steps_ = 0;
  }

 private:
  Tensor momentum_;
  int64_t steps_ = 0;
  bool shards_;
};

enum class Kind { sgd_momentum, sgd_nesterov, adam, rmsprop, adagrad, sign_sgd };
const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::sgd_momentum:
      return "SGD (momentum)";
    case Kind::sgd_nesterov:
      return "SGD (Nesterov)";
    case Kind::adam:
      return "Adam";
    case Kind::rmsprop:
      return "RMSprop (centered, momentum; OneCycleLR)";
    case Kind::adagrad:
      return "Adagrad";
    case Kind::sign_sgd:
      return "SignSGD";
  }
  return "?";
}

// An optimiser of `kind` over `net` and a StepLR over it, kept alive to the end of the tests (the
// trainers refer to them); ranks make theirs from threads at once.
struct Optimisation {
  FlatOptimizer* optimizer;
  LrScheduler* scheduler;
};
Optimisation optimisation(Kind kind, Module& net) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<FlatOptimizer>> optimizers;
  static std::vector<std::unique_ptr<LrScheduler>> schedulers;
  std::lock_guard<std::mutex> lock(mutex);
  switch (kind) {
    case Kind::sgd_momentum:
      optimizers.push_back(std::make_unique<SGD>(
          net, SGDConfig{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-3}));
      break;
    case Kind::sgd_nesterov:
      optimizers.push_back(std::make_unique<SGD>(
          net, SGDConfig{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true}));
      break;
    case Kind::adam:
      optimizers.push_back(
          std::make_unique<Adam>(net, AdamConfig{.lr = 3e-3, .weight_decay = 1e-3}));
      break;
    case Kind::rmsprop:
      optimizers.push_back(std::make_unique<RMSprop>(
          net, RMSpropConfig{.lr = 1e-3, .weight_decay = 1e-3, .momentum = 0.5, .centered = true}));
      break;
    case Kind::adagrad:
      optimizers.push_back(std::make_unique<Adagrad>(
          net, AdagradConfig{.lr = 0.05, .lr_decay = 0.01, .initial_accumulator_value = 0.1}));
      break;
    case Kind::sign_sgd:
      optimizers.push_back(std::make_unique<SignSGD>(net, 1e-3));
      break;
  }
  // RMSprop's rate follows a linear one-cycle over 12 steps (the longest run here): the last
  // step's schedule step reaches step 12, where torch's extrapolation goes below zero.
  if (kind == Kind::rmsprop)
    schedulers.push_back(std::make_unique<OneCycleLR>(
        *optimizers.back(), OneCycleConfig{.max_lr = {3e-3},
                                           .total_steps = 12,
                                           .anneal_strategy = OneCycleConfig::Anneal::linear}));
  else
    schedulers.push_back(std::make_unique<StepLR>(*optimizers.back(), 4, 0.5));
  return {optimizers.back().get(), schedulers.back().get()};
}

using loop_test::make_mlp;

// 60 examples: x [60, 3], y [60, 2] a smooth function of x.
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

// A classifier with dropout: 2 → 32 → 3 on labels of the sign pattern of x, cross-entropy.
std::shared_ptr<Sequential> make_classifier(uint64_t seed) {
  TorchGenerator saved = default_generator();
  manual_seed(seed);
  auto net =
      std::make_shared<Sequential>(std::make_unique<Linear>(2, 32), dg::relu,
                                   std::make_unique<Dropout>(0.2), std::make_unique<Linear>(32, 3));
  default_generator() = saved;
  return net;
}

TensorDataset classification_data() {
  TorchGenerator g(3);
  const Tensor x = randn({48, 2}, DType::f32, &g);
  std::vector<int32_t> labels;
  const float* p = x.data<float>();
  for (int64_t i = 0; i < 48; ++i) labels.push_back(p[2 * i] > 0 ? (p[2 * i + 1] > 0 ? 0 : 1) : 2);
  return TensorDataset({x, Tensor::from_ids(labels, {48})});
}

Tensor cross_entropy_loss(Sequential& net, const Batch& b) {
  return cross_entropy(net.forward(b[0]), b[1]);
}

TrainingConfig settings(int64_t steps, int64_t batch, int64_t accum = 1) {
  TrainingConfig c;
  c.steps = steps;
  c.batch = batch;
  c.accum = accum;
  c.seed = 5;
  return c;
}

std::vector<float> weights(Trainer& t) { return t.parameters().values.to_floats(); }

// Trains `make(seed)` for c.steps uninterrupted, and again with a checkpoint at `half` loaded into
// a fresh model (other initial weights) and Trainer; both must agree bit for bit.
void check_exact_resume(Kind kind, const std::function<std::shared_ptr<Sequential>(uint64_t)>& make,
                        const TensorDataset& data,
                        const std::function<Tensor(Sequential&, const Batch&)>& loss,
                        const TrainingConfig& c, int64_t half) {
  CAPTURE(kind_name(kind));
  TempDir dir("trainer_optimizers");
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 3, /*drop_last=*/false); };
  manual_seed(100);  // dropout's draws come from the default generator
  auto whole_net = make(1);
  Optimisation whole_opt = optimisation(kind, *whole_net);
  Trainer whole(*whole_net, data, sampler(), loss, c, *whole_opt.optimizer, whole_opt.scheduler);
  const std::vector<float> initial = weights(whole);
  whole.run();
  CHECK(weights(whole) != initial);

  manual_seed(100);
  auto first_net = make(1);
  Optimisation first_opt = optimisation(kind, *first_net);
  Trainer first(*first_net, data, sampler(), loss, c, *first_opt.optimizer, first_opt.scheduler);
  first.run(half);
  const std::string ckpt = (dir.path / "half.safetensors").string();
  first.save_checkpoint(ckpt);
  CHECK(load_safetensors(ckpt).metadata.at("depthgrad.optimizer") == first.optimizer().name());
  manual_seed(999);  // whatever the generator does in between, the checkpoint restores it
  randn({17});

  auto fresh_net = make(2);
  Optimisation fresh_opt = optimisation(kind, *fresh_net);
  Trainer resumed(*fresh_net, data, sampler(), loss, c, *fresh_opt.optimizer, fresh_opt.scheduler);
  resumed.load_checkpoint(ckpt);
  CHECK(resumed.step() == half);
  CHECK(fresh_opt.optimizer->lr() == first_opt.optimizer->lr());  // the schedule's position
  resumed.run();
  CHECK(resumed.losses() == whole.losses());
  CHECK(weights(resumed) == weights(whole));
}

}  // namespace

TEST_CASE("SGD with momentum, Adam and a user's optimiser resume an MLP with dropout exactly") {
  const TensorDataset data = regression_data();
  for (Kind kind : {Kind::sgd_momentum, Kind::sgd_nesterov, Kind::adam, Kind::rmsprop,
                    Kind::adagrad, Kind::sign_sgd}) {
    TrainingConfig c = settings(12, 8);
    c.clip = kind == Kind::sgd_nesterov ? 0.5 : 0;  // clipping too, on one of them
    check_exact_resume(
        kind, [](uint64_t seed) { return make_mlp(seed, 0.2); }, data, mse, c, 5);
  }
}

TEST_CASE("SGD with momentum and Adam resume a classifier with dropout exactly") {
  const TensorDataset data = classification_data();
  for (Kind kind : {Kind::sgd_momentum, Kind::adam})
    check_exact_resume(kind, make_classifier, data, cross_entropy_loss, settings(10, 12), 4);
}

TEST_CASE("accumulation over 2 micro-batches equals 2 ranks bit for bit; ZeRO-1 changes no bit") {
  TempDir dir("trainer_optimizers");
  const TensorDataset data = regression_data();
  const auto sampler = [&] { return Sampler::shuffled(data.size(), 8, true); };
  for (Kind kind : {Kind::sgd_momentum, Kind::adam, Kind::rmsprop, Kind::adagrad, Kind::sign_sgd}) {
    CAPTURE(kind_name(kind));
    TrainingConfig accumulated_settings = settings(9, 4, 2);
    accumulated_settings.clip = 0.05;  // most steps clip: the clip path is compared too
    auto accumulated_net = make_mlp(1, 0);
    Optimisation acc = optimisation(kind, *accumulated_net);
    Trainer accumulated(*accumulated_net, data, sampler(), mse, accumulated_settings,
                        *acc.optimizer, acc.scheduler);
    accumulated.run();

    for (int64_t zero : {0, 1}) {
      CAPTURE(zero);
      TrainingConfig per_rank = settings(9, 4, 1);
      per_rank.clip = 0.05;
      per_rank.zero = zero;
      std::vector<std::shared_ptr<Sequential>> nets{make_mlp(1, 0), make_mlp(1, 0)};
      std::vector<std::vector<double>> losses(2);
      std::vector<std::vector<float>> values(2);
      const std::string ckpt = (dir.path / ("ranks" + std::to_string(zero))).string();
      test::ThreadRanks group(2);
      group.run([&](test::ThreadRanks::Rank& rank) {
        Sequential& net = *nets[rank.rank()];
        Optimisation o = optimisation(kind, net);
        Trainer t(net, data, sampler(), mse, per_rank, *o.optimizer, o.scheduler, {}, &rank);
        t.run(4);
        t.save_checkpoint(ckpt);  // with ZeRO-1 the state gathered from the shards
        t.run();
        losses[rank.rank()] = t.losses();
        values[rank.rank()] = weights(t);
      });
      CHECK(losses[0] == accumulated.losses());
      CHECK(values[0] == weights(accumulated));
      CHECK(values[1] == values[0]);

      // The checkpoint of 2 ranks resumes in one process with accumulation 2.
      auto net = make_mlp(3, 0);
      Optimisation o = optimisation(kind, *net);
      Trainer one(*net, data, sampler(), mse, accumulated_settings, *o.optimizer, o.scheduler);
      one.load_checkpoint(ckpt);
      one.run();
      CHECK(one.losses() == accumulated.losses());
      CHECK(weights(one) == weights(accumulated));
    }
  }
}

TEST_CASE("a checkpoint of one optimiser is refused by another, naming both") {
  TempDir dir("trainer_optimizers");
  const TensorDataset data = regression_data();
  auto net = make_mlp(1, 0);
  SGD sgd(*net, SGDConfig{.lr = 0.05, .momentum = 0.9});
  Trainer t(*net, data, Sampler::random(data.size(), 1), mse, settings(4, 8), sgd);
  t.run(2);
  const std::string ckpt = (dir.path / "sgd.safetensors").string();
  t.save_checkpoint(ckpt);

  auto other = make_mlp(2, 0);
  Adam adam(*other, AdamConfig{});
  Trainer u(*other, data, Sampler::random(data.size(), 1), mse, settings(4, 8), adam);
  const std::vector<float> before = weights(u);
  CHECK_THROWS_WITH(u.load_checkpoint(ckpt),
                    doctest::Contains("written with optimizer 'SGD', this run uses 'Adam'"));
  CHECK(weights(u) == before);  // nothing loaded
  CHECK(u.step() == 0);

  // SGD without momentum keeps no per-element state: a momentum SGD's file does not fit it.
  auto plain_net = make_mlp(2, 0);
  SGD plain(*plain_net, SGDConfig{.lr = 0.05});
  Trainer p(*plain_net, data, Sampler::random(data.size(), 1), mse, settings(4, 8), plain);
  CHECK_THROWS_WITH(p.load_checkpoint(ckpt), doctest::Contains("optimizer.momentum_buffer."));
}

TEST_CASE(
    "the Trainer refuses an optimiser that is not over the model, and ZeRO-1 of one that "
    "cannot shard") {
  const TensorDataset data = regression_data();
  auto net = make_mlp(1, 0), other = make_mlp(2, 0);
  SGD elsewhere(*other, SGDConfig{});
  CHECK_THROWS_WITH(Trainer(*net, data, Sampler::random(60, 1), mse, settings(2, 4), elsewhere),
                    doctest::Contains("not over the model's flat buffers"));
  // An optimiser over the model's tensors is moved onto its flat buffers (parameter groups:
  // tests/test_trainer_groups.cpp); one over another model's tensors is refused.
  SGD over_tensors(net->parameters(), SGDConfig{});
  CHECK_NOTHROW(Trainer(*net, data, Sampler::random(60, 1), mse, settings(2, 4), over_tensors));
  CHECK(over_tensors.flat_parameters() == &net->flat_parameters());
  SGD over_other_tensors(other->parameters(), SGDConfig{});
  CHECK_THROWS_WITH(
      Trainer(*net, data, Sampler::random(60, 1), mse, settings(2, 4), over_other_tensors),
      doctest::Contains("is not a parameter of the model being trained"));

  TrainingConfig zero = settings(2, 4);
  zero.zero = 1;
  std::vector<std::shared_ptr<Sequential>> nets{make_mlp(1, 0), make_mlp(1, 0)};
  std::vector<std::string> errors(2);
  test::ThreadRanks group(2);
  group.run([&](test::ThreadRanks::Rank& rank) {
    SignSGD unshardable(*nets[rank.rank()], 1e-3, /*shards=*/false);
    try {
      Trainer t(*nets[rank.rank()], data, Sampler::random(60, 1), mse, zero, unshardable, nullptr,
                {}, &rank);
    } catch (const std::exception& e) {
      errors[rank.rank()] = e.what();
    }
  });
  for (const std::string& e : errors)
    CHECK(e.find("optimizer 'SignSGD' cannot be sharded") != std::string::npos);
}

TEST_CASE("the GPT-2 example's decoder with SGD and Adam: exact resume, 2 ranks = accumulation") {
  TempDir dir("trainer_optimizers");
  const gpt2::Config config{.vocab = 48, .context = 8, .dim = 16, .layers = 1, .heads = 2};
  std::vector<int32_t> ids(400);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + i / 5) % 48);
  const TokenWindows windows(ids, config.context, /*stride=*/1);
  const auto make = [&] {
    auto model = std::make_unique<gpt2::Model>(config);
    model->init_weights(3);
    return model;
  };
  const auto loss = [](gpt2::Model& m, const Batch& b) { return m.loss(b[0], b[1]); };
  const auto sampler = [&] { return Sampler::random(windows.size(), 9); };
  for (Kind kind : {Kind::sgd_momentum, Kind::adam}) {
    CAPTURE(kind_name(kind));
    TrainingConfig c = settings(6, 2, 2);
    c.clip = 1.0;
    auto whole_model = make();
    Optimisation w = optimisation(kind, *whole_model);
    Trainer whole(*whole_model, windows, sampler(), loss, c, *w.optimizer, w.scheduler,
                  config.to_json());
    whole.run(3);
    const std::string ckpt = (dir.path / "gpt2.safetensors").string();
    whole.save_checkpoint(ckpt);
    whole.run();

    auto fresh = std::make_unique<gpt2::Model>(config);
    fresh->init_weights(4);
    Optimisation f = optimisation(kind, *fresh);
    Trainer resumed(*fresh, windows, sampler(), loss, c, *f.optimizer, f.scheduler,
                    config.to_json());
    resumed.load_checkpoint(ckpt);
    resumed.run();
    CHECK(resumed.losses() == whole.losses());
    CHECK(weights(resumed) == weights(whole));

    // Two ranks of one micro-batch each: the bits of accumulation 2 in one process.
    TrainingConfig per_rank = settings(6, 2, 1);
    per_rank.clip = 1.0;
    per_rank.zero = 1;
    std::vector<std::unique_ptr<gpt2::Model>> models;
    models.push_back(make());
    models.push_back(make());
    std::vector<std::vector<double>> losses(2);
    std::vector<std::vector<float>> values(2);
    test::ThreadRanks group(2);
    group.run([&](test::ThreadRanks::Rank& rank) {
      gpt2::Model& model = *models[rank.rank()];
      Optimisation o = optimisation(kind, model);
      Trainer t(model, windows, sampler(), loss, per_rank, *o.optimizer, o.scheduler,
                config.to_json(), &rank);
      t.run();
      losses[rank.rank()] = t.losses();
      values[rank.rank()] = weights(t);
    });
    CHECK(losses[0] == whole.losses());
    CHECK(values[0] == weights(whole));
    CHECK(values[1] == values[0]);
  }
}

TEST_CASE("over 2 and 3 ranks, ZeRO-2 and the sum overlapping backward change no bit") {
  // The GPT-2 example's decoder (tied embedding: a parameter finished only at backward's end)
  // with accumulation 2 and clipping: the reduction after backward with ZeRO-0 is the reference;
  // the overlapped chain with buckets of several sizes (one straddling parameters, one per shard)
  // and ZeRO-1 and ZeRO-2 must give its losses and weights bit for bit, on every rank.
  const gpt2::Config config{.vocab = 40, .context = 8, .dim = 16, .layers = 2, .heads = 2};
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 11 + i / 3) % 40);
  const TokenWindows windows(ids, config.context, /*stride=*/1);
  const auto loss = [](gpt2::Model& m, const Batch& b) { return m.loss(b[0], b[1]); };
  struct Variant {
    int64_t zero;
    bool overlap;
    int64_t bucket;  // 0 = the default
  };
  for (int ranks : {2, 3}) {
    CAPTURE(ranks);
    std::vector<std::vector<double>> reference_losses;
    std::vector<float> reference_weights;
    for (Variant v : {Variant{0, false, 0}, Variant{0, true, 0}, Variant{1, true, 37},
                      Variant{2, true, 500}, Variant{2, true, 64}, Variant{2, false, 0}}) {
      CAPTURE(v.zero);
      CAPTURE(v.overlap);
      CAPTURE(v.bucket);
      TrainingConfig c = settings(5, 2, 2);
      c.clip = 0.5;
      c.zero = v.zero;
      c.overlap = v.overlap;
      std::vector<std::unique_ptr<gpt2::Model>> models;
      for (int r = 0; r < ranks; ++r) {
        models.push_back(std::make_unique<gpt2::Model>(config));
        models.back()->init_weights(5);
      }
      std::vector<std::vector<double>> losses(ranks);
      std::vector<std::vector<float>> values(ranks);
      test::ThreadRanks group(ranks);
      group.run([&](test::ThreadRanks::Rank& rank) {
        gpt2::Model& model = *models[rank.rank()];
        Optimisation o = optimisation(Kind::adam, model);
        Trainer t(model, windows, Sampler::random(windows.size(), 4), loss, c, *o.optimizer,
                  o.scheduler, config.to_json(), &rank);
        if (v.bucket) t.set_bucket_elements(v.bucket);
        t.run();
        losses[rank.rank()] = t.losses();
        values[rank.rank()] = weights(t);
      });
      for (int r = 1; r < ranks; ++r) CHECK(values[r] == values[0]);
      if (reference_weights.empty()) {
        reference_losses = {losses[0]};
        reference_weights = values[0];
        continue;
      }
      CHECK(losses[0] == reference_losses[0]);
      CHECK(values[0] == reference_weights);
    }
  }
}

TEST_CASE("the loop's settings have their own JSON, and a caller's training record must agree") {
  TrainingConfig c = settings(7, 3, 2);
  c.clip = 0.5;
  const json::Value v = training_config_json(c);
  CHECK(json::dump(v) == R"({"steps":7,"batch":3,"clip":0.5,"seed":5,"accum":2,"zero":0})");
  const TrainingConfig back = training_config_from_json(v, "cfg");
  CHECK(json::dump(training_config_json(back)) == json::dump(v));
  CHECK(TrainingConfig{}.clip == 0);  // the loop does not clip unless asked
  CHECK_THROWS_WITH(training_config_from_json(json::parse(R"({"batch": 0})", "t"), "cfg"),
                    doctest::Contains("cfg: training.batch: must be >= 1, got 0"));
  CHECK_THROWS_WITH(training_config_from_json(json::parse(R"({"lr": 1})", "t"), "cfg"),
                    doctest::Contains("cfg: training.lr: unknown key"));

  const TensorDataset data = regression_data();
  auto net = make_mlp(1, 0);
  auto optimizer = std::make_shared<SGD>(*net, SGDConfig{});
  json::Value record = v;
  record["batch"] = 4;  // disagrees with the loop's 3
  record["momentum"] = 0.9;
  CHECK_THROWS_WITH(
      Trainer(TrainingSetup{.model = net,
                            .data = std::make_shared<TensorDataset>(data),
                            .sampler = Sampler::random(60, 1),
                            .loss = typed_loss<Sequential>(mse),
                            .optimizer = optimizer,
                            .training_record = record},
              c),
      doctest::Contains("the training record's 'batch' is 4, the loop's setting is 3"));
}

namespace {
// An SGD and a ReduceLROnPlateau over it, fed the whole data's loss after every third step.
struct PlateauRun {
  std::shared_ptr<Sequential> net;
  SGD optimizer;
  ReduceLROnPlateau plateau;
  std::unique_ptr<Trainer> trainer;
  std::vector<double> rates;  // the rate of every step run here
  PlateauRun(uint64_t seed, const TensorDataset& data, const TrainingConfig& c)
      : net(make_mlp(seed, 0)),
        optimizer(*net, SGDConfig{.lr = 0.1, .momentum = 0.9}),
        plateau(
            optimizer,
            PlateauConfig{
                .factor = 0.5, .patience = 0, .threshold = 0.1, .cooldown = 1, .min_lr = {0.01}}),
        trainer(std::make_unique<Trainer>(*net, data, Sampler::shuffled(data.size(), 3, false), mse,
                                          c, optimizer, &plateau)) {}
  void run(int64_t until, const TensorDataset& data) {
    trainer->run(until, [&](const StepLog& log) {
      rates.push_back(log.lr);
      if ((log.step + 1) % 3 == 0) plateau.step(evaluate_loss<Sequential>(*net, data, mse));
    });
  }
};
}  // namespace

TEST_CASE("ReduceLROnPlateau fed from the step callback resumes exactly, its rates included") {
  TempDir dir("trainer_optimizers");
  const TensorDataset data = regression_data();
  const TrainingConfig c = settings(30, 8);
  PlateauRun whole(1, data, c);
  whole.run(c.steps, data);
  CHECK(whole.plateau.last_epoch() == 10);
  CHECK(whole.optimizer.lr() < 0.1);  // it cut the rate

  PlateauRun first(1, data, c);
  first.run(16, data);  // between two evaluations
  CHECK(first.optimizer.lr() < 0.1);
  CHECK(first.optimizer.lr() > 0.01);  // cut before the checkpoint, and again after it
  const std::string ckpt = (dir.path / "plateau.safetensors").string();
  first.trainer->save_checkpoint(ckpt);
  CHECK(load_safetensors(ckpt).metadata.count("depthgrad.scheduler.best") == 1);

  PlateauRun resumed(2, data, c);
  resumed.trainer->load_checkpoint(ckpt);
  CHECK(resumed.plateau.best() == first.plateau.best());
  CHECK(resumed.plateau.num_bad_epochs() == first.plateau.num_bad_epochs());
  CHECK(resumed.plateau.cooldown_counter() == first.plateau.cooldown_counter());
  CHECK(resumed.plateau.last_epoch() == first.plateau.last_epoch());
  CHECK(resumed.optimizer.lr() == first.optimizer.lr());
  resumed.run(c.steps, data);
  CHECK(resumed.trainer->losses() == whole.trainer->losses());
  CHECK(weights(*resumed.trainer) == weights(*whole.trainer));
  CHECK(resumed.plateau.state() == whole.plateau.state());
  std::vector<double> later(whole.rates.begin() + 16, whole.rates.end());
  CHECK(resumed.rates == later);

  // A schedule that keeps no state refuses the plateau's, and the plateau a file without its own.
  auto net = make_mlp(3, 0);
  SGD sgd(*net, SGDConfig{.lr = 0.1, .momentum = 0.9});
  StepLR step_lr(sgd, 4, 0.5);
  Trainer stateless(*net, data, Sampler::shuffled(data.size(), 3, false), mse, c, sgd, &step_lr);
  CHECK_THROWS_WITH(stateless.load_checkpoint(ckpt), doctest::Contains("keeps no state"));
  CHECK(sgd.lr() == 0.1);
  stateless.run(3);
  const std::string step_ckpt = (dir.path / "steplr.safetensors").string();
  stateless.save_checkpoint(step_ckpt);
  PlateauRun other(4, data, c);
  CHECK_THROWS_WITH(other.trainer->load_checkpoint(step_ckpt),
                    doctest::Contains("ReduceLROnPlateau: state 'best' is missing"));
  CHECK(other.trainer->step() == 0);
}
