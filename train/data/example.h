// Map-style datasets, as torch.utils.data.Dataset: example i is made on request (get(i): read a
// file, decode it, transform it) instead of being a row of tensors held in memory, and a batch is
// its examples stacked (collate, torch's default_collate).
//
// Random transforms (augmentation) draw from an ExampleRng seeded by (seed, epoch, index): the
// same example in the same epoch of the same run gets the same crop and flip whichever loader
// worker makes it, whenever it runs, and after a resume in the middle of the epoch. The loader
// (DataLoader, the Trainer) says which epoch a batch belongs to through Dataset::fill_epoch.
//   struct Squares final : dg::MapDataset {
//     int64_t size() const override { return 100; }
//     dg::Example get(int64_t i, dg::ExampleRng& rng) const override {
//       return {dg::Tensor::full({}, double(i * i)), dg::Tensor::from_ids({i % 2}, {})};
//     }
//   };
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.h"
#include "train/dataset.h"

namespace dg {

// The random draws of one example's transforms: a small generator (SplitMix64 to seed, then
// xoshiro256**) whose stream is a function of (seed, epoch, index) alone. Not torch's generator:
// torchvision draws from each worker's torch generator, so its augmentation changes with the
// number of workers; this one does not (see the header comment).
class ExampleRng {
 public:
  ExampleRng(uint64_t seed, int64_t epoch, int64_t index);
  uint64_t next_u64();
  double uniform();                            // in [0, 1), 53 bits
  double uniform(double low, double high);     // in [low, high)
  int64_t integer(int64_t low, int64_t high);  // in [low, high), high > low (unbiased)
  bool bernoulli(double p);                    // true with probability p

 private:
  uint64_t s_[4];
};

// A dataset whose examples are made one at a time. Subclasses give size() and get(); fill and
// fill_epoch (the loaders' calls) get each example and stack them.
class MapDataset : public Dataset {
 public:
  // Example `index` (in [0, size())), drawing its random choices (if any) from `rng`. Called from
  // the loader's worker threads, several at once: it must not change the dataset (a const method
  // that reads files and its own fixed settings is; a shared counter or cache is not, unless
  // locked). Throws naming the file or index when the example cannot be made.
  virtual Example get(int64_t index, ExampleRng& rng) const = 0;
  // dataset[index] in torch: example `index` (checked against size()) with the draws of epoch 0
  // of seed 0. (Not an overload of get: a subclass's get would hide it.)
  Example at(int64_t index) const;

  // Gets each example (a get() that throws is rethrown as std::runtime_error "dataset example
  // I: <its message>") and collates them.
  void fill(std::span<const int64_t> indices, Batch& out) const override;
  void fill_epoch(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const override;
  // fill_epoch with another collation (a DataLoader's collate_fn).
  void fill_epoch(std::span<const int64_t> indices, const EpochKey& key,
                  const CollateFunction& collate_fn, Batch& out) const;
};

// torch's default_collate for tensors: field f of the batch is field f of every example stacked
// along a new first dimension ([n, ...]). Every example must have the same number of fields and
// each field the same shape and dtype; otherwise std::invalid_argument names the field and the
// first example that differs. out's tensors are reused when their shapes fit (see Dataset::fill).
void collate(std::span<const Example> examples, std::span<const int64_t> indices, Batch& out);

}  // namespace dg
