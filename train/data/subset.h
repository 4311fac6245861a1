// Part of a dataset, as torch.utils.data.Subset, and a dataset cut at random into parts, as
// torch.utils.data.random_split (torch 1.13): the same parts, index for index, as torch's for the
// same lengths and the same generator seed (the permutation is dg::randperm, torch.randperm's
// draws from the library's TorchGenerator).
//   dg::TorchGenerator g(42);
//   std::vector<dg::Subset> parts = dg::random_split(data, {0.8, 0.2}, &g);  // or {800, 200}
//   dg::DataLoader train(parts[0], {.batch_size = 32, .shuffle = true});
// A Subset is a Dataset: DataLoader, for_each_batch and the Trainer take it. Its example i is the
// dataset's example indices()[i]. fill and fill_epoch forward to the dataset with the mapped
// indices, so a dataset with random transforms draws example i's augmentation from the key of
// the *dataset's* index (ExampleRng(seed, epoch, indices()[i])): the same draws as when the
// dataset itself is loaded, whichever split it sits in. The batch's `indices` are the subset's
// own (i, as the loader asked), not the dataset's.
// Where it differs from torch on purpose: negative lengths (torch 1.13 accepts them when they
// sum to the size and returns slices that overlap) and fractions that do not sum to 1 (torch
// falls through to its "sum of input lengths" error) are refused, each with its own message; and
// integers are always lengths (torch reads integer lengths that sum to 1 as fractions: [1, 0] of
// 5 examples gives parts of 5 and 0 there, and is refused here as not summing to 5).
// It does not copy examples: the dataset must outlive its subsets.
#pragma once
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "tensor/rng.h"
#include "train/dataset.h"

namespace dg {

class Subset final : public Dataset {
 public:
  // Examples `indices` of `data` (each in [0, data.size()); repeats allowed, as torch's).
  // Throws std::out_of_range naming the first index outside.
  Subset(const Dataset& data, std::vector<int64_t> indices);
  Subset(const Dataset&&, std::vector<int64_t>) = delete;  // a temporary would not outlive it

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  void fill(std::span<const int64_t> indices, Batch& out) const override;
  void fill_epoch(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const override;
  int64_t tokens_per_example() const override { return data_->tokens_per_example(); }

  const Dataset& dataset() const { return *data_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  // The dataset's indices of the subset's examples `indices` (checked against size()).
  void map(std::span<const int64_t> indices, std::vector<int64_t>& mapped) const;
  const Dataset* data_;
  std::vector<int64_t> indices_;
};

// torch 1.13's random_split with lengths: parts of lengths[k] examples, which must each be >= 0
// and sum to data.size(). The examples are torch.randperm(data.size(), generator) cut in order
// (part 0 the first lengths[0] of the permutation, ...). `generator` advances as torch's does;
// nullptr: the default generator (dg::default_generator(), torch's global one).
std::vector<Subset> random_split(const Dataset& data, std::span<const int64_t> lengths,
                                 TorchGenerator* generator = nullptr);
template <std::integral I>
std::vector<Subset> random_split(const Dataset& data, std::initializer_list<I> lengths,
                                 TorchGenerator* generator = nullptr) {
  const std::vector<int64_t> wide(lengths.begin(), lengths.end());
  return random_split(data, std::span<const int64_t>(wide), generator);
}
// With fractions (each in [0, 1], summing to 1 as math.isclose does, and not above 1): part k
// has floor(size · fractions[k]) examples, then the remainder is handed out one at a time to
// parts 0, 1, 2, … round-robin, as torch 1.13 does.
std::vector<Subset> random_split(const Dataset& data, std::span<const double> fractions,
                                 TorchGenerator* generator = nullptr);
std::vector<Subset> random_split(const Dataset& data, std::initializer_list<double> fractions,
                                 TorchGenerator* generator = nullptr);
// The lengths torch 1.13 makes of `fractions` for a dataset of `size` examples (the rule above).
std::vector<int64_t> split_lengths(int64_t size, std::span<const double> fractions);

// A temporary dataset would not outlive its parts.
std::vector<Subset> random_split(const Dataset&&, std::span<const int64_t>,
                                 TorchGenerator* = nullptr) = delete;
std::vector<Subset> random_split(const Dataset&&, std::span<const double>,
                                 TorchGenerator* = nullptr) = delete;
template <std::integral I>
std::vector<Subset> random_split(const Dataset&&, std::initializer_list<I>,
                                 TorchGenerator* = nullptr) = delete;
std::vector<Subset> random_split(const Dataset&&, std::initializer_list<double>,
                                 TorchGenerator* = nullptr) = delete;

}  // namespace dg
