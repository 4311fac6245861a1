// Subset and random_split (train/data/subset.h): the parts equal torch 1.13's random_split index
// for index (tests/random_split_goldens.h, written by tools/torch_goldens_random_split.py), with
// lengths and with fractions; a Subset fills its examples from the dataset with the mapped
// indices (augmentation keyed by the dataset's index); bad lengths, fractions and indices are
// refused with their own messages.
#include <doctest/doctest.h>

#include <numeric>

#include "autograd/ops.h"
#include "random_split_goldens.h"
#include "train/data/example.h"
#include "train/data/subset.h"

using namespace dg;

namespace {

TensorDataset counting(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), int64_t{0});
  return TensorDataset({Tensor::from_ids(ids, {n})});
}

// The parts' lengths and their indices, part after part (the goldens' layout).
std::pair<std::vector<int64_t>, std::vector<int64_t>> flatten(const std::vector<Subset>& parts) {
  std::vector<int64_t> lengths, indices;
  for (const Subset& p : parts) {
    lengths.push_back(p.size());
    indices.insert(indices.end(), p.indices().begin(), p.indices().end());
  }
  return {lengths, indices};
}

void check_split(int64_t n, const std::vector<Subset>& parts, const std::vector<int64_t>& lengths,
                 const std::vector<int64_t>& indices) {
  const auto [got_lengths, got_indices] = flatten(parts);
  CHECK(got_lengths == lengths);
  CHECK(got_indices == indices);
  for (const Subset& p : parts) CHECK(p.dataset().size() == n);
}

// Example i is the first draw of its own generator: which key it was made with shows in its value.
struct KeyedExamples final : MapDataset {
  int64_t size() const override { return 6; }
  Example get(int64_t index, ExampleRng& rng) const override {
    return {Tensor::from_ids({static_cast<int64_t>(rng.next_u64() >> 12)}, {}),
            Tensor::from_ids({index}, {})};
  }
};

}  // namespace

TEST_CASE("random_split with lengths gives torch 1.13's parts, index for index") {
  const TensorDataset ten = counting(10), hundred = counting(100);
  TorchGenerator g0(0), g42(42), g123(123);
  check_split(10, random_split(ten, {3, 7}, &g0), kSplitTenThreeSeven_lengths,
              kSplitTenThreeSeven_indices);
  check_split(10, random_split(ten, {5, 5}, &g42), kSplitTenFiveFive_lengths,
              kSplitTenFiveFive_indices);
  const std::vector<int64_t> lengths{60, 30, 10};
  check_split(100, random_split(hundred, lengths, &g123), kSplitHundredLengths_lengths,
              kSplitHundredLengths_indices);
  // Without a generator: torch's global one, after manual_seed on both sides.
  const TensorDataset twelve = counting(12);
  manual_seed(5);
  check_split(12, random_split(twelve, {4, 8}), kSplitDefaultGenerator_lengths,
              kSplitDefaultGenerator_indices);
}

TEST_CASE("random_split with fractions: torch's lengths (remainder round-robin) and parts") {
  const TensorDataset d25 = counting(25), d11 = counting(11), d7 = counting(7), d13 = counting(13),
                      d5 = counting(5);
  TorchGenerator g1(1), g7(7), g3(3), g2024(2024), g9(9);
  check_split(25, random_split(d25, {0.7, 0.2, 0.1}, &g1), kSplitFractionsThree_lengths,
              kSplitFractionsThree_indices);
  check_split(11, random_split(d11, {0.5, 0.5}, &g7), kSplitFractionsHalves_lengths,
              kSplitFractionsHalves_indices);
  check_split(7, random_split(d7, {0.3, 0.3, 0.4}, &g3), kSplitFractionsRemainder_lengths,
              kSplitFractionsRemainder_indices);
  // Ten tenths sum to 0.9999999999999999 in double: close enough to 1, as math.isclose says.
  const std::vector<double> tenths(10, 0.1);
  check_split(13, random_split(d13, tenths, &g2024), kSplitFractionsTenths_lengths,
              kSplitFractionsTenths_indices);
  check_split(5, random_split(d5, {0.9, 0.1}, &g9), kSplitFractionsEmptyPart_lengths,
              kSplitFractionsEmptyPart_indices);
  CHECK(split_lengths(25, std::vector<double>{0.7, 0.2, 0.1}) == std::vector<int64_t>{18, 5, 2});
}

TEST_CASE("random_split refuses lengths and fractions that do not make the dataset") {
  const TensorDataset ten = counting(10);
  CHECK_THROWS_WITH(random_split(ten, {3, 6}),
                    doctest::Contains("the lengths sum to 9, the dataset has 10 examples"));
  CHECK_THROWS_WITH(random_split(ten, {3, 8}),
                    doctest::Contains("the lengths sum to 11, the dataset has 10 examples"));
  // torch 1.13 accepts [-1, 11] (it sums to 10) and returns overlapping slices; we refuse it.
  CHECK_THROWS_WITH(random_split(ten, {-1, 11}),
                    doctest::Contains("length -1 (part 0) is negative"));
  CHECK_THROWS_WITH(random_split(ten, std::vector<int64_t>{}), doctest::Contains("no lengths"));
  // torch reads [1, 0] as fractions (all 10 in part 0); integers here are always lengths.
  CHECK_THROWS_WITH(random_split(ten, {1, 0}),
                    doctest::Contains("the lengths sum to 1, the dataset has 10 examples"));
  CHECK_THROWS_WITH(
      random_split(ten, {0.5, 0.4}),
      doctest::Contains("the fractions sum to 0.90000000000000002; they must sum to 1"));
  CHECK_THROWS_WITH(random_split(ten, {0.6, 0.6}), doctest::Contains("the fractions sum to 1.2"));
  CHECK_THROWS_WITH(random_split(ten, {1.5, -0.5}),
                    doctest::Contains("fraction 1.5 (part 0) is not between 0 and 1"));
  CHECK_THROWS_WITH(random_split(ten, std::vector<double>{}), doctest::Contains("no fractions"));
  // A refused split draws nothing from the generator.
  TorchGenerator g(0), fresh(0);
  CHECK_THROWS(random_split(ten, {0.5, 0.4}, &g));
  CHECK(g.next_u32() == fresh.next_u32());
}

TEST_CASE("random_split advances the generator as torch's does: one randperm per split") {
  const TensorDataset ten = counting(10);
  TorchGenerator g(0), twin(0);
  (void)random_split(ten, {5, 5}, &g);
  (void)randperm(10, &twin);
  CHECK(g.next_u64() == twin.next_u64());
}

TEST_CASE("Subset fills the dataset's mapped rows; the batch's indices are the subset's") {
  const Tensor x = Tensor::from_vector(std::vector<float>{0, 1, 10, 11, 20, 21, 30, 31}, {4, 2});
  TensorDataset data({x, Tensor::from_ids({7, 8, 9, 6}, {4})});
  Subset part(data, {3, 1, 3});
  CHECK(part.size() == 3);
  Batch b;
  part.fill(std::vector<int64_t>{2, 0, 1}, b);
  CHECK(b[0].to_vector() == std::vector<double>{30, 31, 30, 31, 10, 11});
  CHECK(b[1].to_vector() == std::vector<double>{6, 6, 8});
  CHECK(b.indices == std::vector<int64_t>{2, 0, 1});

  // A DataLoader over it: its epoch is the subset's examples, in torch's order.
  DataLoader loader(part, {.batch_size = 2});
  std::vector<double> seen;
  for (const Batch& batch : loader)
    for (double v : batch[1].to_vector()) seen.push_back(v);
  CHECK(seen == std::vector<double>{6, 8, 6});

  CHECK_THROWS_WITH(Subset(data, {0, 4}),
                    doctest::Contains("index 4 (position 1) is outside the dataset's [0, 4)"));
  CHECK_THROWS_WITH(Subset(data, {-1}), doctest::Contains("index -1 (position 0)"));
  CHECK_THROWS_WITH(part.fill(std::vector<int64_t>{3}, b),
                    doctest::Contains("example index 3 is outside [0, 3)"));
  CHECK_THROWS_WITH(part.fill(std::vector<int64_t>{-1}, b),
                    doctest::Contains("example index -1 is outside [0, 3)"));
}

TEST_CASE("Subset::fill_epoch keys each example's draws by the dataset's index") {
  const KeyedExamples data;
  Subset part(data, {4, 2, 5});
  const EpochKey key{.seed = 11, .epoch = 3};
  Batch through_subset, direct;
  part.fill_epoch(std::vector<int64_t>{0, 1, 2}, key, through_subset);
  data.fill_epoch(std::vector<int64_t>{4, 2, 5}, key, direct);
  CHECK(through_subset[0].to_vector() == direct[0].to_vector());
  CHECK(through_subset[1].to_vector() == std::vector<double>{4, 2, 5});
  CHECK(through_subset.indices == std::vector<int64_t>{0, 1, 2});
  // A different epoch draws differently (the key reaches the dataset).
  Batch other;
  part.fill_epoch(std::vector<int64_t>{0, 1, 2}, {.seed = 11, .epoch = 4}, other);
  CHECK(other[0].to_vector() != direct[0].to_vector());
}

TEST_CASE("a Subset through a DataLoader with workers gives the batches of no workers") {
  const KeyedExamples data;
  Subset part(data, {5, 0, 3, 2});
  const auto epochs = [&](int64_t workers) {
    TorchGenerator g(3);
    DataLoader loader(part,
                      {.batch_size = 3, .shuffle = true, .generator = &g, .num_workers = workers});
    std::vector<double> seen;
    for (int epoch = 0; epoch < 3; ++epoch)
      for (const Batch& batch : loader)
        for (const Tensor& field : batch.tensors)
          for (double v : field.to_vector()) seen.push_back(v);
    return seen;
  };
  const std::vector<double> alone = epochs(0);
  CHECK(alone.size() == 3 * 2 * 4);  // 3 epochs, 2 fields, 4 examples
  CHECK(epochs(2) == alone);
}
