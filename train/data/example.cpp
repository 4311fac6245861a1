// Map-style datasets and default collation (see example.h).
#include "train/data/example.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "tensor/rng.h"

namespace dg {

// ---- ExampleRng

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

// The three numbers are folded into one state, each through a full SplitMix64 round so that
// neighbouring indices (or epochs) start far apart; the next four SplitMix64 outputs of that
// state fill xoshiro's state (as xoshiro's authors seed it).
ExampleRng::ExampleRng(uint64_t seed, int64_t epoch, int64_t index) {
  uint64_t state = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch));
  state = splitmix64(state ^ static_cast<uint64_t>(index));
  for (int k = 0; k < 4; ++k)
    s_[k] = splitmix64(state + static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ULL);
}

uint64_t ExampleRng::next_u64() {  // xoshiro256**
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double ExampleRng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double ExampleRng::uniform(double low, double high) { return low + (high - low) * uniform(); }

// Lemire's rejection: the draws below `threshold` would make some results more likely.
int64_t ExampleRng::integer(int64_t low, int64_t high) {
  if (high <= low)
    throw std::invalid_argument(
        fmt::format("ExampleRng::integer: empty range [{}, {})", low, high));
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t threshold = (0 - range) % range;
  for (;;) {
    const unsigned __int128 product = static_cast<unsigned __int128>(next_u64()) * range;
    if (static_cast<uint64_t>(product) >= threshold)
      return low + static_cast<int64_t>(product >> 64);
  }
}

bool ExampleRng::bernoulli(double p) { return uniform() < p; }

// ---- MapDataset

Example MapDataset::at(int64_t index) const {
  if (index < 0 || index >= size())
    throw std::out_of_range(
        fmt::format("dataset: example index {} is outside [0, {})", index, size()));
  ExampleRng rng(0, 0, index);
  return get(index, rng);
}

void MapDataset::fill(std::span<const int64_t> indices, Batch& out) const {
  fill_epoch(indices, EpochKey{}, out);
}

void MapDataset::fill_epoch(std::span<const int64_t> indices, const EpochKey& key,
                            Batch& out) const {
  fill_epoch(indices, key, collate, out);
}

void MapDataset::fill_epoch(std::span<const int64_t> indices, const EpochKey& key,
                            const CollateFunction& collate_fn, Batch& out) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t index : indices) {
    if (index < 0 || index >= size())
      throw std::out_of_range(
          fmt::format("dataset: example index {} is outside [0, {})", index, size()));
    ExampleRng rng(key.seed, key.epoch, index);
    try {
      examples.push_back(get(index, rng));
    } catch (const std::exception& e) {  // say which example, whichever thread made it
      throw std::runtime_error(fmt::format("dataset example {}: {}", index, e.what()));
    }
  }
  collate_fn(examples, indices, out);
}

// ---- collate

void collate(std::span<const Example> examples, std::span<const int64_t> indices, Batch& out) {
  if (examples.size() != indices.size())
    throw std::invalid_argument(
        fmt::format("collate: {} examples for {} indices", examples.size(), indices.size()));
  if (examples.empty()) throw std::invalid_argument("collate: no examples");
  const size_t fields = examples[0].size();
  out.tensors.resize(fields);
  for (size_t f = 0; f < fields; ++f) {
    const Tensor& first = examples[0][f];
    Shape shape = first.shape();
    shape.insert(shape.begin(), static_cast<int64_t>(examples.size()));
    Tensor& target = batch_field(out, f, shape, first.dtype());
    const size_t bytes = static_cast<size_t>(first.numel()) * dtype_size(first.dtype());
    auto* to = static_cast<unsigned char*>(target.storage()->data()) +
               static_cast<size_t>(target.offset()) * dtype_size(target.dtype());
    for (size_t k = 0; k < examples.size(); ++k) {
      if (examples[k].size() != fields)
        throw std::invalid_argument(
            fmt::format("collate: example {} (index {}) has {} fields, example {} has {}", k,
                        indices[k], examples[k].size(), indices[0], fields));
      const Tensor& part = examples[k][f];
      if (!part.defined() || part.shape() != first.shape() || part.dtype() != first.dtype())
        throw std::invalid_argument(fmt::format(
            "collate: field {} of example {} is {} {}, of example {} {} {}: every example's "
            "field must have one shape and dtype to be stacked (resize or crop images to one "
            "size)",
            f, indices[k], part.defined() ? dtype_name(part.dtype()) : "undefined",
            part.defined() ? shape_str(part.shape()) : "", indices[0], dtype_name(first.dtype()),
            shape_str(first.shape())));
      const Tensor dense = part.contiguous();
      std::memcpy(to + k * bytes,
                  static_cast<const unsigned char*>(dense.storage()->data()) +
                      static_cast<size_t>(dense.offset()) * dtype_size(dense.dtype()),
                  bytes);
    }
  }
  out.indices.assign(indices.begin(), indices.end());
}

}  // namespace dg
