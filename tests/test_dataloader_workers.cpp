// DataLoader with worker threads (train/data/prefetch.h) and map-style datasets
// (train/data/example.h): any number of workers gives the batches of none, bit for bit, over
// epochs, streams, a range-for left part-way and a resume from the sampler's state; random draws
// are keyed by (seed, epoch, index) (the same whichever thread makes them, new each epoch); the
// default generator is not drawn ahead; a worker's exception reaches next() naming the example;
// collation's checks; the refusals. The Trainer with loader workers: the steps of one without,
// with accumulation and a stream or a DataLoader's epochs, and a resume mid-epoch.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autograd/ops.h"
#include "nn/containers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/loop_test_models.h"
#include "tests/temp_dir.h"
#include "train/data/example.h"
#include "train/data/prefetch.h"
#include "train/dataset.h"
#include "train/trainer.h"

using namespace dg;

namespace {
// Example i: a [2, 3] float32 "image" of i plus random draws, an int64 label; sleeps a little
// at some indices so workers finish out of order; throws at `bad` naming a file.
struct NoisyDataset final : MapDataset {
  int64_t n = 37;
  int64_t bad = -1;
  mutable std::atomic<int64_t> calls{0};
  int64_t size() const override { return n; }
  Example get(int64_t i, ExampleRng& rng) const override {
    calls.fetch_add(1);
    if (i == bad) throw std::runtime_error("images/broken.png: truncated PNG data");
    if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    std::vector<float> v(6);
    for (float& x : v) x = static_cast<float>(i) + static_cast<float>(rng.uniform());
    return {Tensor::from_vector(v, {2, 3}), Tensor::from_ids({i % 4}, {})};
  }
};

// The batches (every field's bytes as floats, and the indices) of `epochs` range-for epochs.
std::vector<std::vector<double>> run_epochs(DataLoader& loader, int epochs) {
  std::vector<std::vector<double>> out;
  for (int e = 0; e < epochs; ++e)
    for (const Batch& b : loader) {
      out.push_back(b[0].to_vector());
      std::vector<double> labels = b[1].to_vector();
      out.back().insert(out.back().end(), labels.begin(), labels.end());
      for (int64_t i : b.indices) out.back().push_back(static_cast<double>(i));
    }
  return out;
}

std::vector<std::vector<double>> run_stream(DataLoader& loader, int batches) {
  std::vector<std::vector<double>> out;
  Batch b;
  for (int k = 0; k < batches; ++k) {
    loader.next(b);
    out.push_back(b[0].to_vector());
    for (int64_t i : b.indices) out.back().push_back(static_cast<double>(i));
  }
  return out;
}
}  // namespace

TEST_CASE("a DataLoader with workers gives the batches of one without, over epochs") {
  NoisyDataset data;
  for (bool drop_last : {false, true}) {
    TorchGenerator g(11);
    DataLoader plain(data,
                     {.batch_size = 5, .shuffle = true, .drop_last = drop_last, .generator = &g});
    const auto expected = run_epochs(plain, 3);
    CHECK(expected.size() == static_cast<size_t>(3 * plain.size()));
    for (int64_t workers : {1, 2, 3}) {
      for (int64_t factor : {1, 2, 4}) {
        DataLoader loader(data, {.batch_size = 5,
                                 .shuffle = true,
                                 .drop_last = drop_last,
                                 .generator = &g,
                                 .num_workers = workers,
                                 .prefetch_factor = factor});
        CHECK(run_epochs(loader, 3) == expected);
        // Only each epoch's first batch was not made ahead.
        CHECK(loader.prefetcher()->misses() == 3);
        CHECK(loader.prefetcher()->hits() == 3 * loader.size() - 3);
      }
    }
  }
}

TEST_CASE("random draws are keyed by seed, epoch and index") {
  NoisyDataset data;
  ExampleRng a(3, 1, 17), b(3, 1, 17), c(3, 2, 17), d(3, 1, 18), e(4, 1, 17);
  const uint64_t first = a.next_u64();
  CHECK(first == b.next_u64());
  CHECK(first != c.next_u64());
  CHECK(first != d.next_u64());
  CHECK(first != e.next_u64());
  // The same example in two epochs gets two draws; within one epoch, one.
  TorchGenerator g(5);
  DataLoader loader(data, {.batch_size = 37, .generator = &g, .num_workers = 2});
  std::vector<double> epoch1, epoch2;
  for (const Batch& batch : loader) epoch1 = batch[0].to_vector();
  for (const Batch& batch : loader) epoch2 = batch[0].to_vector();
  REQUIRE(epoch1.size() == 37 * 6);
  int same = 0;
  for (size_t k = 0; k < epoch1.size(); ++k) same += epoch1[k] == epoch2[k];
  CHECK(same == 0);
  for (size_t k = 0; k < epoch1.size(); ++k) {
    CHECK(epoch1[k] >= static_cast<double>(k / 6));  // index + uniform in [0, 1)
    CHECK(epoch1[k] < static_cast<double>(k / 6) + 1);
  }
  // get(i) alone draws as epoch 0 of seed 0.
  ExampleRng zero(0, 0, 9);
  CHECK(data.at(9)[0].to_vector()[0] == static_cast<float>(9 + zero.uniform()));
}

TEST_CASE("ExampleRng's integers are in range and cover it") {
  ExampleRng rng(1, 2, 3);
  std::vector<int> counts(7, 0);
  for (int k = 0; k < 7000; ++k) {
    const int64_t v = rng.integer(-3, 4);
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++counts[static_cast<size_t>(v + 3)];
  }
  for (int c : counts) CHECK(c > 800);  // 1000 expected each
  int heads = 0;
  for (int k = 0; k < 10000; ++k) heads += rng.bernoulli(0.25);
  CHECK(heads > 2300);
  CHECK(heads < 2700);
  CHECK_THROWS_WITH_AS(rng.integer(4, 4), "ExampleRng::integer: empty range [4, 4)",
                       std::invalid_argument);
}

TEST_CASE("a stream loader with workers follows its sampler across epochs") {
  NoisyDataset data;
  for (bool drop_last : {false, true}) {
    DataLoader plain(data, Sampler::shuffled(data.size(), 9, drop_last), 8);
    const auto expected = run_stream(plain, 20);
    for (int64_t workers : {1, 2}) {
      DataLoader loader(data, Sampler::shuffled(data.size(), 9, drop_last), 8, workers, 3);
      CHECK(run_stream(loader, 20) == expected);
      CHECK(loader.prefetcher()->misses() == 1);  // a stream is predicted across epochs
    }
  }
}

TEST_CASE("a range-for left part-way and a restored sampler drop what the workers made") {
  NoisyDataset data;
  TorchGenerator g(21);
  DataLoader plain(data, {.batch_size = 4, .shuffle = true, .generator = &g});
  DataLoader loader(data, {.batch_size = 4, .shuffle = true, .generator = &g, .num_workers = 2});
  for (DataLoader* l : {&plain, &loader}) {  // three batches of an epoch, then a new range-for
    int k = 0;
    for (const Batch& b : *l) {
      (void)b;
      if (++k == 3) break;
    }
  }
  CHECK(run_epochs(loader, 2) == run_epochs(plain, 2));
  // Resume: a checkpoint's sampler state, restored into a loader that has batches queued.
  Batch b;
  for (int k = 0; k < 3; ++k) loader.next(b);
  const std::vector<uint8_t> state = loader.sampler().state();
  const auto expected = run_stream(loader, 6);
  for (int k = 0; k < 2; ++k) loader.next(b);  // the workers run ahead of the saved position
  loader.sampler().set_state(state);
  CHECK(run_stream(loader, 6) == expected);
  DataLoader copy(loader);  // a copy starts its own workers where the original is
  CHECK(run_stream(copy, 4) == run_stream(loader, 4));
}

TEST_CASE("workers do not draw the default generator ahead") {
  NoisyDataset data;
  manual_seed(77);
  DataLoader plain(data, {.batch_size = 6, .shuffle = true});
  const auto expected = run_epochs(plain, 2);
  const std::vector<uint8_t> after = default_generator().state();
  manual_seed(77);
  DataLoader loader(data, {.batch_size = 6, .shuffle = true, .num_workers = 2});
  CHECK(run_epochs(loader, 2) == expected);
  CHECK(default_generator().state() == after);
}

TEST_CASE("a worker's exception reaches next() with the example's index and file") {
  NoisyDataset data;
  data.bad = 13;
  DataLoader loader(data, Sampler::sequential(data.size()), 4, 2);
  Batch b;
  loader.next(b);
  loader.next(b);
  loader.next(b);  // examples 8..11
  CHECK_THROWS_WITH_AS(loader.next(b), "dataset example 13: images/broken.png: truncated PNG data",
                       std::runtime_error);
  DataLoader inline_loader(data, Sampler::sequential(data.size()), 16);
  CHECK_THROWS_WITH_AS(inline_loader.next(b),
                       "dataset example 13: images/broken.png: truncated PNG data",
                       std::runtime_error);
}

TEST_CASE("each example is made once per batch, and a TensorDataset works with workers") {
  NoisyDataset data;
  DataLoader loader(data, Sampler::sequential(data.size()), 4, 2, 2);
  Batch b;
  for (int k = 0; k < 5; ++k) loader.next(b);
  // 5 batches taken and at most 4 more queued: no batch was filled twice.
  CHECK(data.calls.load() <= 9 * 4);
  CHECK(data.calls.load() >= 5 * 4);
  TensorDataset rows({arange(100.0, DType::f32), arange(100.0, DType::i64)});
  DataLoader plain(rows, Sampler::shuffled(100, 3, false), 7);
  DataLoader threaded(rows, Sampler::shuffled(100, 3, false), 7, 2);
  CHECK(run_stream(threaded, 30) == run_stream(plain, 30));
}

TEST_CASE("collate stacks fields and refuses examples that differ") {
  Batch out;
  std::vector<Example> examples = {{Tensor::zeros({2, 2}), Tensor::from_ids({1}, {})},
                                   {Tensor::ones({2, 2}), Tensor::from_ids({3}, {})}};
  const std::vector<int64_t> indices = {4, 9};
  collate(examples, indices, out);
  CHECK(out[0].shape() == Shape{2, 2, 2});
  CHECK(out[1].shape() == Shape{2});
  CHECK(out[1].dtype() == DType::i64);
  CHECK(out[1].to_vector() == std::vector<double>{1, 3});
  CHECK(out.indices == indices);
  examples[1][0] = Tensor::ones({2, 3});
  CHECK_THROWS_WITH_AS(collate(examples, indices, out),
                       "collate: field 0 of example 9 is float32 [2, 3], of example 4 float32 "
                       "[2, 2]: every example's field must have one shape and dtype to be "
                       "stacked (resize or crop images to one size)",
                       std::invalid_argument);
  examples[1] = {Tensor::ones({2, 2})};
  CHECK_THROWS_WITH_AS(collate(examples, indices, out),
                       "collate: example 1 (index 9) has 1 fields, example 4 has 2",
                       std::invalid_argument);
}

TEST_CASE("DataLoader refuses bad worker settings") {
  NoisyDataset data;
  CHECK_THROWS_WITH_AS(DataLoader(data, {.batch_size = 2, .num_workers = -1}),
                       "DataLoader: num_workers must be >= 0, got -1", std::invalid_argument);
  CHECK_THROWS_WITH_AS(DataLoader(data, {.batch_size = 2, .num_workers = 1, .prefetch_factor = 0}),
                       "DataLoader: prefetch_factor must be >= 1, got 0", std::invalid_argument);
}

namespace {
// A regression example with augmentation: x [3] jittered by the example's draws, y [2].
struct JitteredRegression final : MapDataset {
  int64_t size() const override { return 30; }
  Example get(int64_t i, ExampleRng& rng) const override {
    const float a = static_cast<float>(i) / 30.0f;
    std::vector<float> x = {a, 1 - a, a * a};
    for (float& v : x) v += static_cast<float>(rng.uniform(-0.05, 0.05));
    return {Tensor::from_vector(x, {3}), Tensor::from_vector(std::vector<float>{a, -a}, {2})};
  }
};

Tensor regression_loss(Sequential& net, const Batch& b) {
  return mse_loss(net.forward(b[0]), b[1]);
}

TrainingConfig steps_of(int64_t steps, int64_t batch, int64_t accum) {
  TrainingConfig c;
  c.steps = steps;
  c.batch = batch;
  c.accum = accum;
  c.seed = 3;
  return c;
}
}  // namespace

TEST_CASE("the Trainer with loader workers takes the steps of one without, and resumes") {
  const JitteredRegression data;
  dg::test::TempDir dir("loader_workers");
  std::vector<double> expected_losses;
  std::vector<float> expected_weights;
  for (int64_t workers : {0, 1, 2}) {
    CAPTURE(workers);
    auto net = loop_test::make_mlp(1, 0);
    SGD opt(*net, SGDConfig{.lr = 0.1, .momentum = 0.9});
    TrainingSetup setup{
        .model = net,
        .data = std::shared_ptr<const Dataset>(std::shared_ptr<void>(), &data),
        .sampler = Sampler::shuffled(data.size(), 4, false),
        .loss = [](Module& m,
                   const Batch& b) { return regression_loss(static_cast<Sequential&>(m), b); },
        .optimizer = std::shared_ptr<FlatOptimizer>(std::shared_ptr<void>(), &opt),
        .loader_workers = workers,
        .prefetch_factor = 3};
    Trainer trainer(setup, steps_of(12, 4, 2));  // 8 examples a step: epochs span steps
    trainer.run();
    if (workers > 0) {  // 24 micro-batches: only the first was not ready in the queue
      REQUIRE(trainer.prefetcher() != nullptr);
      CHECK(trainer.prefetcher()->misses() == 1);
      CHECK(trainer.prefetcher()->hits() == 23);
    }
    if (workers == 0) {
      expected_losses = trainer.losses();
      expected_weights = trainer.parameters().values.to_floats();
    } else {
      CHECK(trainer.losses() == expected_losses);
      CHECK(trainer.parameters().values.to_floats() == expected_weights);
    }
  }

  // A DataLoader's epochs with workers: a run stopped mid-epoch and resumed (with another worker
  // count) equals the whole run without workers.
  TorchGenerator g(8);
  const TrainingConfig c = steps_of(16, 7, 1);  // epochs of 4 × 7 and a 2
  auto whole_net = loop_test::make_mlp(1, 0);
  SGD whole_opt(*whole_net, SGDConfig{.lr = 0.05});
  Trainer whole(*whole_net, DataLoader(data, {.batch_size = 7, .shuffle = true, .generator = &g}),
                regression_loss, c, whole_opt);
  whole.run();
  auto first_net = loop_test::make_mlp(1, 0);
  SGD first_opt(*first_net, SGDConfig{.lr = 0.05});
  Trainer first(
      *first_net,
      DataLoader(data, {.batch_size = 7, .shuffle = true, .generator = &g, .num_workers = 2}),
      regression_loss, c, first_opt);
  CHECK(first.loader_workers() == 2);
  first.run(7);
  const std::string ckpt = (dir.path / "mid.safetensors").string();
  first.save_checkpoint(ckpt);
  auto fresh_net = loop_test::make_mlp(2, 0);
  SGD fresh_opt(*fresh_net, SGDConfig{.lr = 0.05});
  Trainer resumed(*fresh_net,
                  DataLoader(data, {.batch_size = 7,
                                    .shuffle = true,
                                    .generator = &g,
                                    .num_workers = 1,
                                    .prefetch_factor = 4}),
                  regression_loss, c, fresh_opt);
  resumed.load_checkpoint(ckpt);
  resumed.run();
  // Steps 8 to 16: the first after the resume and each epoch's first (steps 11 and 16) filled here.
  CHECK(resumed.prefetcher()->misses() == 3);
  CHECK(resumed.prefetcher()->hits() == 6);
  CHECK(resumed.losses() == whole.losses());
  CHECK(resumed.parameters().values.to_floats() == whole.parameters().values.to_floats());
  CHECK_THROWS_WITH_AS(resumed.set_loader_workers(-2),
                       "trainer: loader_workers must be >= 0 and prefetch_factor >= 1, got -2 "
                       "and 2",
                       std::invalid_argument);
}

TEST_CASE("DataLoader's collate_fn makes the batches, on the workers too") {
  NoisyDataset data;
  // A collate that keeps the images and sums the labels into one int64 [1] tensor.
  const CollateFunction summed = [](std::span<const Example> examples,
                                    std::span<const int64_t> indices, Batch& out) {
    std::vector<Example> images;
    int64_t sum = 0;
    for (const Example& e : examples) {
      images.push_back({e[0]});
      sum += static_cast<int64_t>(e[1].item());
    }
    collate(images, indices, out);
    out.tensors.push_back(Tensor::from_ids({sum}, {1}));
  };
  for (int64_t workers : {0, 2}) {
    DataLoader loader(data, {.batch_size = 4, .num_workers = workers, .collate_fn = summed});
    int64_t batches = 0;
    for (const Batch& b : loader) {
      REQUIRE(b.tensors.size() == 2);
      int64_t expected = 0;
      for (int64_t i : b.indices) expected += i % 4;
      CHECK(b[1].to_vector() == std::vector<double>{static_cast<double>(expected)});
      CHECK(b[0].shape() == Shape{b.size(), 2, 3});
      ++batches;
    }
    CHECK(batches == 10);
  }
  TensorDataset rows({arange(8.0, DType::f32)});
  CHECK_THROWS_WITH_AS(DataLoader(rows, {.batch_size = 2, .collate_fn = summed}),
                       "DataLoader: a collate_fn needs a map-style dataset (a MapDataset, whose "
                       "examples it collates); this dataset fills its batches itself",
                       std::invalid_argument);
}
