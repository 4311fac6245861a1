// Datasets, samplers and the loader (train/dataset.h): rows and windows land where they
// should, each sampler draws what it promises (the reference's numpy draws, wrapping sequences,
// epochs of permutations with and without drop-last), and a sampler's state resumes its stream.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "train/dataset.h"
#include "train/lm/batches.h"

using namespace dg;

namespace {
std::vector<int32_t> counting_ids(int64_t n) {
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}
std::vector<int64_t> draw(Sampler& s, int64_t count) {
  std::vector<int64_t> out;
  s.next(count, out);
  return out;
}
}  // namespace

TEST_CASE("TensorDataset copies whole rows of every field, in the indices' order") {
  const Tensor x = Tensor::from_vector(std::vector<float>{0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  const Tensor y = Tensor::from_vector(std::vector<int64_t>{7, 8, 9, 6}, {4});
  TensorDataset data({x, y});
  CHECK(data.size() == 4);
  Batch b;
  const std::vector<int64_t> pick{2, 0, 2};
  data.fill(pick, b);
  CHECK(b[0].shape() == Shape{3, 2});
  CHECK(b[0].to_vector() == std::vector<double>{20, 21, 0, 1, 20, 21});
  CHECK(b[1].dtype() == DType::i64);
  CHECK(b[1].to_vector() == std::vector<double>{9, 7, 9});
  CHECK(b.indices == pick);

  // A tensor kept from the last batch is never overwritten by the next one.
  const Tensor kept = b[0];
  data.fill(std::vector<int64_t>{1, 1, 1}, b);
  CHECK(kept.to_vector() == std::vector<double>{20, 21, 0, 1, 20, 21});
  CHECK(b[0].to_vector() == std::vector<double>{10, 11, 10, 11, 10, 11});

  // A view (every other row) is taken as its logical rows.
  TensorDataset strided({dg::raw::view_narrow(x, 1, 1, 1)});
  strided.fill(std::vector<int64_t>{3, 0}, b);
  CHECK(b[0].to_vector() == std::vector<double>{31, 1});

  CHECK_THROWS_WITH(TensorDataset({x, Tensor::zeros({3})}),
                    doctest::Contains("tensor 1 has 3 rows, tensor 0 has 4"));
  CHECK_THROWS_WITH(TensorDataset({}), doctest::Contains("no tensors"));
  CHECK_THROWS_WITH(data.fill(std::vector<int64_t>{4}, b),
                    doctest::Contains("index 4 is outside [0, 4)"));
  CHECK_THROWS_WITH(b[2], doctest::Contains("field 2"));
}

TEST_CASE("TokenWindows: inputs and shifted targets; the reference's and consecutive windows") {
  const std::vector<int32_t> ids = counting_ids(20);
  TokenWindows any(ids, 4, 3);  // starts 0, 3, …, 15 (15 + 4 + 1 = 20)
  CHECK(any.size() == 6);
  CHECK(any.tokens_per_example() == 4);
  Batch b;
  any.fill(std::vector<int64_t>{5, 1}, b);
  CHECK(b[0].dtype() == DType::i64);
  CHECK(b[0].to_vector() == std::vector<double>{15, 16, 17, 18, 3, 4, 5, 6});
  CHECK(b[1].to_vector() == std::vector<double>{16, 17, 18, 19, 4, 5, 6, 7});

  // The reference draws starts in [0, len − T − 1): one fewer than the full windows.
  CHECK(TokenWindows::reference(ids, 4).size() == 15);
  CHECK(TokenWindows(ids, 4, 1).size() == 16);
  CHECK(TokenWindows::consecutive(ids, 4).size() == 4);  // 0, 4, 8, 12 (16 + 5 > 20)
  CHECK(TokenWindows(ids, 4, 1, 3).size() == 3);

  std::vector<int32_t> owned = ids;
  TokenWindows keeps(std::move(owned), 4, 4);
  owned.assign(20, -1);
  keeps.fill(std::vector<int64_t>{1}, b);
  CHECK(b[0].to_vector() == std::vector<double>{4, 5, 6, 7});

  CHECK_THROWS_WITH(TokenWindows(counting_ids(4), 4, 1), doctest::Contains("at least 5"));
  CHECK_THROWS_WITH(TokenWindows::reference(counting_ids(5), 4), doctest::Contains("too few"));
}

TEST_CASE("Sampler::random is the reference's batch draw, bit for bit") {
  const std::vector<int32_t> ids = counting_ids(500);
  const TokenWindows windows = TokenWindows::reference(ids, 16);
  Sampler sampler = Sampler::random(windows.size(), 42);
  NumpyGenerator rng(42);
  LmBatch reference;
  Batch mine;
  for (int step = 0; step < 5; ++step) {
    sample_lm_batch(rng, ids, 8, 16, reference);
    std::vector<int64_t> indices = draw(sampler, 8);
    CHECK(indices == reference.starts);
    windows.fill(indices, mine);
    CHECK(mine[0].to_vector() == reference.inputs.to_vector());
    CHECK(mine[1].to_vector() == reference.targets.to_vector());
  }
}

TEST_CASE("Sampler::sequential counts up and starts again when a batch would run past the end") {
  Sampler s = Sampler::sequential(7);
  CHECK(draw(s, 3) == std::vector<int64_t>{0, 1, 2});
  CHECK(draw(s, 3) == std::vector<int64_t>{3, 4, 5});
  CHECK(draw(s, 3) == std::vector<int64_t>{0, 1, 2});  // 6, 7, 8 would not fit
  CHECK_THROWS_WITH(draw(s, 8), doctest::Contains("larger than the dataset"));
}

TEST_CASE("Sampler::shuffled: epochs are permutations; drop-last skips a short tail or spans") {
  Sampler a = Sampler::shuffled(10, 3), b = Sampler::shuffled(10, 3), c = Sampler::shuffled(10, 4);
  std::vector<int64_t> first = draw(a, 10);
  CHECK(first == draw(b, 10));
  CHECK(first != draw(c, 10));
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(a.epoch() == 0);
  std::vector<int64_t> second = draw(a, 10);
  CHECK(a.epoch() == 1);
  CHECK(second != first);  // another permutation

  // drop_last: batches of 4 over 10 take 8 of each epoch and never mix two epochs.
  Sampler dropping = Sampler::shuffled(10, 5, true);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int k = 0; k < 2; ++k)
      for (int64_t i : draw(dropping, 4)) CHECK(seen.insert(i).second);
    CHECK(dropping.epoch() == epoch);
  }
  // Without it, the tail of epoch 0 and the head of epoch 1 share a batch: every example of
  // epoch 0 is used exactly once in the first 10 draws.
  Sampler spanning = Sampler::shuffled(10, 5, false);
  std::vector<int64_t> all;
  for (int k = 0; k < 3; ++k)
    for (int64_t i : draw(spanning, 4)) all.push_back(i);
  CHECK(spanning.epoch() == 1);
  std::vector<int64_t> epoch0(all.begin(), all.begin() + 10);
  std::sort(epoch0.begin(), epoch0.end());
  CHECK(epoch0 == sorted);
  CHECK(draw(spanning, 25).size() == 25);  // larger than the dataset: several epochs
}

TEST_CASE("a sampler's state resumes its stream exactly and refuses another stream or damage") {
  for (Sampler original : {Sampler::random(50, 9), Sampler::sequential(50),
                           Sampler::shuffled(50, 9, true), Sampler::shuffled(50, 9, false)}) {
    INFO(json::dump(original.description()));
    for (int k = 0; k < 7; ++k) draw(original, 16);  // past an epoch's end
    const std::vector<uint8_t> state = original.state();
    const std::vector<int64_t> expected = draw(original, 16);
    Sampler resumed = original;
    draw(resumed, 5);  // anywhere else
    resumed.set_state(state);
    CHECK(draw(resumed, 16) == expected);
  }
  Sampler s = Sampler::shuffled(50, 9);
  const std::vector<uint8_t> state = s.state();
  std::vector<uint8_t> damaged = state;
  damaged[30] ^= 1;
  CHECK_THROWS_WITH(s.set_state(damaged), doctest::Contains("checksum"));
  CHECK_THROWS_WITH(s.set_state({1, 2, 3}), doctest::Contains("too short"));
  Sampler other_seed = Sampler::shuffled(50, 10);
  CHECK_THROWS_WITH(other_seed.set_state(state), doctest::Contains("another stream"));
  Sampler other_size = Sampler::shuffled(51, 9);
  CHECK_THROWS_WITH(other_size.set_state(state), doctest::Contains("another stream"));

  // A position past the end with a valid checksum (as a writer with a bug would make it).
  std::vector<uint8_t> far = state;
  const uint64_t position = 51;
  std::memcpy(far.data() + 8 + 5 * 8, &position, 8);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i + 8 < far.size(); ++i) h = (h ^ far[i]) * 1099511628211ull;
  std::memcpy(far.data() + far.size() - 8, &h, 8);
  CHECK_THROWS_WITH(s.set_state(far), doctest::Contains("position 51 is outside"));
  CHECK(draw(s, 3) == draw(other_size = Sampler::shuffled(50, 9), 3));  // s untouched
}

TEST_CASE("DataLoader batches a dataset forever; for_each_batch passes over it once") {
  const Tensor x = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4}, {5, 1});
  TensorDataset data({x});
  DataLoader loader(data, Sampler::sequential(5), 2);
  Batch b;
  loader.next(b);
  loader.next(b);
  CHECK(b[0].to_vector() == std::vector<double>{2, 3});
  loader.next(b);
  CHECK(b[0].to_vector() == std::vector<double>{0, 1});
  CHECK_THROWS_WITH(DataLoader(data, Sampler::sequential(4), 2),
                    doctest::Contains("covers 4 examples, the dataset has 5"));

  std::vector<double> seen;
  std::vector<int64_t> sizes;
  for_each_batch(data, 2, [&](const Batch& batch) {
    sizes.push_back(batch.size());
    for (double v : batch[0].to_vector()) seen.push_back(v);
  });
  CHECK(sizes == std::vector<int64_t>{2, 2, 1});
  CHECK(seen == std::vector<double>{0, 1, 2, 3, 4});
}
