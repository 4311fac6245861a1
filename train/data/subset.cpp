// Subset and random_split (see subset.h).
#include "train/data/subset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"

namespace dg {

Subset::Subset(const Dataset& data, std::vector<int64_t> indices)
    : data_(&data), indices_(std::move(indices)) {
  const int64_t n = data.size();
  for (size_t k = 0; k < indices_.size(); ++k)
    if (indices_[k] < 0 || indices_[k] >= n)
      throw std::out_of_range(fmt::format(
          "Subset: index {} (position {}) is outside the dataset's [0, {})", indices_[k], k, n));
}

void Subset::map(std::span<const int64_t> indices, std::vector<int64_t>& mapped) const {
  mapped.resize(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= size())
      throw std::out_of_range(
          fmt::format("Subset: example index {} is outside [0, {})", i, size()));
    mapped[k] = indices_[static_cast<size_t>(i)];
  }
}

void Subset::fill(std::span<const int64_t> indices, Batch& out) const {
  std::vector<int64_t> mapped;
  map(indices, mapped);
  data_->fill(mapped, out);
  out.indices.assign(indices.begin(), indices.end());
}

void Subset::fill_epoch(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const {
  std::vector<int64_t> mapped;
  map(indices, mapped);
  data_->fill_epoch(mapped, key, out);
  out.indices.assign(indices.begin(), indices.end());
}

std::vector<Subset> random_split(const Dataset& data, std::span<const int64_t> lengths,
                                 TorchGenerator* generator) {
  if (lengths.empty()) throw std::invalid_argument("random_split: no lengths given");
  int64_t total = 0;
  for (size_t k = 0; k < lengths.size(); ++k) {
    if (lengths[k] < 0)
      throw std::invalid_argument(
          fmt::format("random_split: length {} (part {}) is negative", lengths[k], k));
    total += lengths[k];
  }
  if (total != data.size())
    throw std::invalid_argument(fmt::format(
        "random_split: the lengths sum to {}, the dataset has {} examples (they must be equal)",
        total, data.size()));
  // torch: indices = randperm(sum(lengths), generator=generator).tolist(), cut in order.
  const Tensor permutation = randperm(total, generator);
  const int64_t* order = permutation.data<int64_t>();
  std::vector<Subset> parts;
  int64_t first = 0;
  for (int64_t length : lengths) {
    parts.emplace_back(data, std::vector<int64_t>(order + first, order + first + length));
    first += length;
  }
  return parts;
}

std::vector<int64_t> split_lengths(int64_t size, std::span<const double> fractions) {
  if (fractions.empty()) throw std::invalid_argument("random_split: no fractions given");
  double sum = 0;  // Python's sum(lengths): left to right, in double
  for (double f : fractions) sum += f;
  // torch 1.13: math.isclose(sum(lengths), 1) and sum(lengths) <= 1 (isclose: rel_tol 1e-9).
  const bool close = std::fabs(sum - 1.0) <= 1e-9 * std::max(std::fabs(sum), 1.0);
  if (!(close && sum <= 1.0))
    throw std::invalid_argument(
        fmt::format("random_split: the fractions sum to {:.17g}; they must sum to 1 (and not "
                    "exceed it)",
                    sum));
  std::vector<int64_t> lengths;
  int64_t assigned = 0;
  for (size_t k = 0; k < fractions.size(); ++k) {
    if (!(fractions[k] >= 0 && fractions[k] <= 1))
      throw std::invalid_argument(fmt::format(
          "random_split: fraction {} (part {}) is not between 0 and 1", fractions[k], k));
    lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(size) * fractions[k])));
    assigned += lengths.back();
  }
  // The remainder, one example at a time, to parts 0, 1, 2, ... round-robin.
  for (int64_t i = 0; i < size - assigned; ++i)
    ++lengths[static_cast<size_t>(i % static_cast<int64_t>(lengths.size()))];
  return lengths;
}

std::vector<Subset> random_split(const Dataset& data, std::span<const double> fractions,
                                 TorchGenerator* generator) {
  const std::vector<int64_t> lengths = split_lengths(data.size(), fractions);
  return random_split(data, std::span<const int64_t>(lengths), generator);
}

std::vector<Subset> random_split(const Dataset& data, std::initializer_list<double> fractions,
                                 TorchGenerator* generator) {
  return random_split(data, std::span<const double>(fractions.begin(), fractions.size()),
                      generator);
}

}  // namespace dg
