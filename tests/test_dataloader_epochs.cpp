// DataLoader made with DataLoaderOptions, against torch 1.13's DataLoader (goldens from
// tools/torch_goldens_schedules_loader.py in tests/schedules_loader_goldens.h): the examples of
// every batch over several epochs and each batch's size, with shuffle (an own generator, or the
// default one after manual_seed, whose position after the epochs is checked too) and without,
// drop_last true and false; len(loader); range-for and next() giving the same batches; a
// range-for left part-way starts a new epoch; the sampler's state resumed mid-epoch; the
// refusals. The Trainer over such a loader (mid-epoch resume) is in tests/test_trainer_groups.cpp.
#include <doctest/doctest.h>

#include <vector>

#include "tensor/factory.h"
#include "tensor/rng.h"
#include "tests/schedules_loader_goldens.h"
#include "train/dataset.h"

using namespace dg;

namespace {
std::vector<int64_t> values(const Batch& b) {
  std::vector<int64_t> out;
  for (double v : b[0].to_vector()) out.push_back(static_cast<int64_t>(v));
  return out;
}

// Every batch of `epochs` range-for epochs: the examples in order, and the sizes.
void run_epochs(DataLoader& loader, int epochs, std::vector<int64_t>& order,
                std::vector<int64_t>& sizes) {
  for (int e = 0; e < epochs; ++e)
    for (const Batch& batch : loader) {
      sizes.push_back(batch.size());
      for (int64_t v : values(batch)) order.push_back(v);
    }
}

void check_loader(int64_t n, int epochs, const DataLoaderOptions& options,
                  const std::vector<int64_t>& golden_order,
                  const std::vector<int64_t>& golden_sizes, int64_t golden_len) {
  TensorDataset data({arange(static_cast<double>(n), DType::i64)});
  DataLoader loader(data, options);
  CHECK(loader.size() == golden_len);
  std::vector<int64_t> order, sizes;
  run_epochs(loader, epochs, order, sizes);
  CHECK(order == golden_order);
  CHECK(sizes == golden_sizes);
}
}  // namespace

TEST_CASE("DataLoader(shuffle, generator) gives torch 1.13's batches, epoch by epoch") {
  TorchGenerator g(7);
  check_loader(10, 3, {.batch_size = 3, .shuffle = true, .generator = &g}, kShuffleOwn_order,
               kShuffleOwn_sizes, kShuffleOwn_len);
  check_loader(10, 3, {.batch_size = 3, .shuffle = true, .drop_last = true, .generator = &g},
               kShuffleOwnDrop_order, kShuffleOwnDrop_sizes, kShuffleOwnDrop_len);
  check_loader(12, 3, {.batch_size = 4, .shuffle = true, .generator = &g}, kShuffleOwnEven_order,
               kShuffleOwnEven_sizes, kShuffleOwnEven_len);
  check_loader(12, 3, {.batch_size = 5, .shuffle = true, .drop_last = true, .generator = &g},
               kShuffleOwnEvenDrop_order, kShuffleOwnEvenDrop_sizes, kShuffleOwnEvenDrop_len);
  TorchGenerator h(123);
  check_loader(100, 2, {.batch_size = 16, .shuffle = true, .generator = &h}, kShuffleHundred_order,
               kShuffleHundred_sizes, kShuffleHundred_len);
  // The generator given is copied: its own state has not moved.
  CHECK(g.state() == TorchGenerator(7).state());
}

TEST_CASE("DataLoader without a generator draws from the default one as torch's does") {
  const TorchGenerator saved = default_generator();
  struct Case {
    DataLoaderOptions options;
    const std::vector<int64_t>&order, &sizes;
    int64_t len;
    const std::vector<double>& rand_after;
  };
  for (const Case& c : {Case{{.batch_size = 4, .shuffle = true},
                             kShuffleDefault_order,
                             kShuffleDefault_sizes,
                             kShuffleDefault_len,
                             kShuffleDefault_rand_after},
                        Case{{.batch_size = 4},
                             kSequentialDefault_order,
                             kSequentialDefault_sizes,
                             kSequentialDefault_len,
                             kSequentialDefault_rand_after},
                        Case{{.batch_size = 4, .drop_last = true},
                             kSequentialDrop_order,
                             kSequentialDrop_sizes,
                             kSequentialDrop_len,
                             kSequentialDrop_rand_after}}) {
    manual_seed(5);
    check_loader(10, 2, c.options, c.order, c.sizes, c.len);
    // torch draws a base seed per epoch (and, shuffling, a seed for the permutation): the default
    // generator is where torch's is after the two epochs.
    const std::vector<double> after = rand({2}, DType::f32).to_vector();
    CHECK(after == c.rand_after);
  }
  default_generator() = saved;
}

TEST_CASE("DataLoader: next() continues the epochs; a range-for begins a new epoch") {
  TensorDataset data({arange(10.0, DType::i64)});
  TorchGenerator g(7);
  DataLoader by_next(data, {.batch_size = 3, .shuffle = true, .generator = &g});
  std::vector<int64_t> order;
  Batch b;
  for (int i = 0; i < 3 * 4; ++i) {  // three epochs of 4 batches
    by_next.next(b);
    for (int64_t v : values(b)) order.push_back(v);
  }
  CHECK(order == kShuffleOwn_order);
  CHECK(by_next.sampler().epoch() == 3);
  // Epochs that end on a full batch, and drop_last: next() across epochs is still torch's for
  // loops run to their end.
  for (bool drop : {false, true}) {
    TensorDataset twelve({arange(12.0, DType::i64)});
    const int64_t batch = drop ? 5 : 4;
    DataLoader even(twelve,
                    {.batch_size = batch, .shuffle = true, .drop_last = drop, .generator = &g});
    std::vector<int64_t> got;
    for (int i = 0; i < 3 * even.size(); ++i) {
      even.next(b);
      for (int64_t v : values(b)) got.push_back(v);
    }
    CHECK(got == (drop ? kShuffleOwnEvenDrop_order : kShuffleOwnEven_order));
  }

  DataLoader partway(data, {.batch_size = 3, .shuffle = true, .generator = &g});
  for (const Batch& batch : partway) {  // the first batch of epoch 1, then break
    CHECK(values(batch) == kShuffleOwnBreak_first);
    break;
  }
  // A whole new epoch (torch's second iter()); the first, left part-way, drew no trailing
  // permutation, so this is not the second epoch of loops run to their end.
  std::vector<int64_t> second;
  for (const Batch& batch : partway)
    for (int64_t v : values(batch)) second.push_back(v);
  CHECK(second == kShuffleOwnBreak_next_epoch);
}

TEST_CASE("DataLoader's order resumes mid-epoch from the sampler's state") {
  TensorDataset data({arange(10.0, DType::i64)});
  for (bool own : {true, false}) {
    CAPTURE(own);
    const TorchGenerator saved = default_generator();
    manual_seed(5);
    TorchGenerator g(7);
    const DataLoaderOptions options{
        .batch_size = 4, .shuffle = true, .generator = own ? &g : nullptr};
    DataLoader a(data, options);
    Batch b;
    for (int i = 0; i < 4; ++i) a.next(b);  // into the second epoch
    const std::vector<uint8_t> state = a.sampler().state();
    const TorchGenerator default_then = default_generator();
    std::vector<int64_t> rest;
    for (int i = 0; i < 5; ++i) {
      a.next(b);
      for (int64_t v : values(b)) rest.push_back(v);
    }
    DataLoader resumed(data, options);
    resumed.sampler().set_state(state);
    default_generator() = default_then;  // the Trainer restores it from the checkpoint
    std::vector<int64_t> again;
    for (int i = 0; i < 5; ++i) {
      resumed.next(b);
      for (int64_t v : values(b)) again.push_back(v);
    }
    CHECK(again == rest);
    default_generator() = saved;
  }
}

TEST_CASE("DataLoader refuses what torch's would not run, naming it") {
  TensorDataset data({arange(5.0, DType::i64)});
  CHECK_THROWS_WITH(DataLoader(data, {.batch_size = 0}),
                    doctest::Contains("batch must be >= 1, got 0"));
  CHECK_THROWS_WITH(DataLoader(data, {.batch_size = 8, .drop_last = true}),
                    doctest::Contains("drop_last with batch_size 8 larger than the dataset"));
  DataLoader stream(data, Sampler::sequential(5), 2);
  CHECK_THROWS_WITH(stream.size(), doctest::Contains("an endless stream without epochs"));
  CHECK_THROWS_WITH(stream.begin(), doctest::Contains("an endless stream without epochs"));
  // The stream keeps its values: a sequential sampler drops the tail and starts again.
  Batch b;
  for (int i = 0; i < 3; ++i) stream.next(b);
  CHECK(values(b) == std::vector<int64_t>{0, 1});
}
