// Datasets, samplers and the loader (see dataset.h).
#include "train/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "train/data/example.h"
#include "train/data/prefetch.h"

namespace dg {

const Tensor& Batch::operator[](size_t field) const {
  if (field >= tensors.size())
    throw std::out_of_range(
        fmt::format("batch: field {} asked for, the batch has {}", field, tensors.size()));
  return tensors[field];
}

Tensor& batch_field(Batch& out, size_t field, const Shape& shape, DType dtype) {
  if (out.tensors.size() <= field) out.tensors.resize(field + 1);
  Tensor& slot = out.tensors[field];
  if (!slot.defined() || slot.shape() != shape || slot.dtype() != dtype ||
      slot.handle_count() != 1 || slot.storage_holders() != 1)
    slot = Tensor::empty(shape, dtype);
  return slot;
}

namespace {

void check_indices(std::span<const int64_t> indices, int64_t size, const char* who) {
  for (int64_t i : indices)
    if (i < 0 || i >= size)
      throw std::out_of_range(fmt::format("{}: example index {} is outside [0, {})", who, i, size));
}
}  // namespace

// ---- TensorDataset

TensorDataset::TensorDataset(std::vector<Tensor> tensors) {
  if (tensors.empty()) throw std::invalid_argument("TensorDataset: no tensors given");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined())
      throw std::invalid_argument(fmt::format("TensorDataset: tensor {} is undefined", i));
    if (t.dim() < 1)
      throw std::invalid_argument(fmt::format(
          "TensorDataset: tensor {} is a scalar; every tensor needs a first (example) dimension",
          i));
    if (t.size(0) != tensors[0].size(0))
      throw std::invalid_argument(
          fmt::format("TensorDataset: tensor {} has {} rows, tensor 0 has {}", i, t.size(0),
                      tensors[0].size(0)));
    tensors_.push_back(t.contiguous());
  }
  rows_ = tensors[0].size(0);
}

// out[f] [n, ...] = tensors[f][indices[k], ...] for each k: a copy of whole rows.
void TensorDataset::fill(std::span<const int64_t> indices, Batch& out) const {
  check_indices(indices, rows_, "TensorDataset");
  out.tensors.resize(tensors_.size());
  for (size_t f = 0; f < tensors_.size(); ++f) {
    const Tensor& source = tensors_[f];
    Shape shape = source.shape();
    shape[0] = static_cast<int64_t>(indices.size());
    Tensor& target = batch_field(out, f, shape, source.dtype());
    const size_t row_bytes =
        rows_ > 0 ? static_cast<size_t>(source.numel() / rows_) * dtype_size(source.dtype()) : 0;
    const auto* from = static_cast<const unsigned char*>(source.storage()->data()) +
                       static_cast<size_t>(source.offset()) * dtype_size(source.dtype());
    auto* to = static_cast<unsigned char*>(target.storage()->data()) +
               static_cast<size_t>(target.offset()) * dtype_size(target.dtype());
    for (size_t k = 0; k < indices.size(); ++k)
      std::memcpy(to + k * row_bytes, from + static_cast<size_t>(indices[k]) * row_bytes,
                  row_bytes);
  }
  out.indices.assign(indices.begin(), indices.end());
}

// ---- TokenWindows

TokenWindows::TokenWindows(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride,
                           int64_t count)
    : ids_(&ids), seq_len_(seq_len), stride_(stride) {
  if (seq_len < 1 || stride < 1)
    throw std::invalid_argument(fmt::format(
        "TokenWindows: seq_len and stride must be >= 1, got {} and {}", seq_len, stride));
  const int64_t length = static_cast<int64_t>(ids.size());
  // Windows with s + T + 1 <= len, s = i·stride.
  const int64_t full = length >= seq_len + 1 ? (length - seq_len - 1) / stride + 1 : 0;
  count_ = count < 0 ? full : std::min(count, full);
  if (count_ < 1)
    throw std::invalid_argument(
        fmt::format("TokenWindows: {} token ids hold no window of {} tokens (plus the shifted "
                    "target): at least {} are needed",
                    length, seq_len, seq_len + 1));
}

TokenWindows::TokenWindows(std::vector<int32_t>&& ids, int64_t seq_len, int64_t stride,
                           int64_t count)
    : TokenWindows(std::make_shared<const std::vector<int32_t>>(std::move(ids)), seq_len, stride,
                   count) {}

namespace {
const std::vector<int32_t>& non_null(const std::shared_ptr<const std::vector<int32_t>>& ids) {
  if (!ids) throw std::invalid_argument("TokenWindows: the token ids are a null shared_ptr");
  return *ids;
}
}  // namespace

TokenWindows::TokenWindows(std::shared_ptr<const std::vector<int32_t>> ids, int64_t seq_len,
                           int64_t stride, int64_t count)
    : TokenWindows(non_null(ids), seq_len, stride, count) {
  owned_ = std::move(ids);
}

TokenWindows TokenWindows::reference(const std::vector<int32_t>& ids, int64_t seq_len) {
  const int64_t starts = static_cast<int64_t>(ids.size()) - seq_len - 1;
  if (starts < 1)
    throw std::invalid_argument(fmt::format(
        "TokenWindows: {} token ids are too few for windows of {} (the reference draws starts "
        "in [0, len - T - 1), which needs at least {} ids)",
        ids.size(), seq_len, seq_len + 2));
  return TokenWindows(ids, seq_len, 1, starts);
}

TokenWindows TokenWindows::consecutive(const std::vector<int32_t>& ids, int64_t seq_len) {
  return TokenWindows(ids, seq_len, seq_len);
}

// inputs [n, T] = ids[s : s+T], targets [n, T] = ids[s+1 : s+T+1], s = indices[k]·stride.
void TokenWindows::fill(std::span<const int64_t> indices, Batch& out) const {
  check_indices(indices, count_, "TokenWindows");
  const int64_t n = static_cast<int64_t>(indices.size()), T = seq_len_;
  out.tensors.resize(2);
  int64_t* inputs = batch_field(out, 0, {n, T}, DType::i64).data<int64_t>();
  int64_t* targets = batch_field(out, 1, {n, T}, DType::i64).data<int64_t>();
  const int32_t* ids = ids_->data();
  for (int64_t k = 0; k < n; ++k) {
    const int32_t* window = ids + indices[k] * stride_;
    std::copy(window, window + T, inputs + k * T);  // int32 ids widened to int64 indices
    std::copy(window + 1, window + T + 1, targets + k * T);
  }
  out.indices.assign(indices.begin(), indices.end());
}

// ---- Sampler

Sampler::Sampler(Kind kind, int64_t size, uint64_t seed, bool drop_last)
    : kind_(kind),
      size_(size),
      seed_(seed),
      drop_last_(drop_last),
      rng_(seed),
      augment_seed_(seed) {
  if (size < 1)
    throw std::invalid_argument(
        fmt::format("sampler: the dataset has {} examples; it needs at least one", size));
  if (kind_ == Kind::shuffled) permute();
}

Sampler Sampler::random(int64_t size, uint64_t seed) {
  return Sampler(Kind::random, size, seed, false);
}
Sampler Sampler::sequential(int64_t size) { return Sampler(Kind::sequential, size, 0, true); }
Sampler Sampler::shuffled(int64_t size, uint64_t seed, bool drop_last) {
  return Sampler(Kind::shuffled, size, seed, drop_last);
}

// Epoch e's permutation: Fisher–Yates from the end with numpy-style draws from a generator seeded
// by (seed, e), so any epoch can be rebuilt from the two numbers alone (a resume does).
void Sampler::permute() {
  NumpyGenerator g(seed_ ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch_ + 1)));
  order_.resize(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order_[i] = i;
  for (int64_t i = size_ - 1; i > 0; --i) std::swap(order_[i], order_[g.integers(0, i + 1)]);
}

Sampler Sampler::torch_order(int64_t size, bool shuffle, bool drop_last,
                             const TorchGenerator* generator) {
  Sampler s(Kind::torch, size, generator ? generator->initial_seed() : 0, drop_last);
  s.augment_seed_ = generator ? generator->initial_seed() : default_generator().initial_seed();
  s.shuffle_ = shuffle;
  if (generator) s.generator_ = *generator;
  return s;
}

void Sampler::torch_permute(TorchGenerator& g) {
  // torch 1.13's randperm on the CPU: Fisher–Yates from the front, one 32-bit draw per swap.
  order_.resize(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order_[i] = i;
  for (int64_t i = 0; i < size_ - 1; ++i) {
    const int64_t z = static_cast<int64_t>(g.next_u32() % static_cast<uint64_t>(size_ - i));
    std::swap(order_[i], order_[z + i]);
  }
}

// torch 1.13: iter(DataLoader) draws the iterator's _base_seed (random_() of an int64: one
// random64()), then the RandomSampler draws randperm from the loader's generator or, without
// one, from a generator seeded with a second int64 draw from the global one.
void Sampler::begin_epoch() {
  TorchGenerator& g = generator_ ? *generator_ : default_generator();
  (void)g.next_u64();
  epoch_source_.clear();
  if (!shuffle_) {
    order_.resize(static_cast<size_t>(size_));
    for (int64_t i = 0; i < size_; ++i) order_[i] = i;
  } else if (generator_) {
    epoch_source_ = g.state();
    torch_permute(g);
    tail_draw_pending_ = true;
  } else {
    TorchGenerator fresh(g.next_u64() % (uint64_t{1} << 63));
    epoch_source_ = fresh.state();
    torch_permute(fresh);
  }
  ++epoch_;
  position_ = 0;
}

// torch 1.13's RandomSampler yields its permutation, then draws one more randperm(size) whose
// empty slice ends it: when the sampler is run to its end (a for loop over the loader that
// finishes), not when the epoch is left part-way. Only an own generator sees it (without one, the
// epoch's fresh generator draws it).
void Sampler::finish_epoch() {
  if (!tail_draw_pending_) return;
  tail_draw_pending_ = false;
  for (int64_t i = 0; i < size_ - 1; ++i) (void)generator_->next_u32();
}

void Sampler::restart_epoch() {
  if (kind_ != Kind::torch)
    throw std::invalid_argument(
        "sampler: restart_epoch needs the torch order (Sampler::torch_order); the other kinds "
        "are endless streams");
  if (epoch_ > 0) position_ = size_;
  tail_draw_pending_ = false;  // an epoch left part-way is not run to its end
}

int64_t Sampler::batches_per_epoch(int64_t batch) const {
  if (kind_ != Kind::torch)
    throw std::invalid_argument(
        "sampler: batches per epoch are defined for the torch order (Sampler::torch_order) only");
  if (batch < 1) throw std::invalid_argument(fmt::format("sampler: batch of {} asked", batch));
  return drop_last_ ? size_ / batch : (size_ + batch - 1) / batch;
}

bool Sampler::next_begins_epoch(int64_t count) const {
  return epoch_ == 0 || position_ == size_ || (drop_last_ && size_ - position_ < count);
}

bool Sampler::can_draw_ahead(int64_t count) const {
  return kind_ != Kind::torch || !next_begins_epoch(count);
}

void Sampler::next(int64_t count, std::vector<int64_t>& out) {
  if (count < 1) throw std::invalid_argument(fmt::format("sampler: batch of {} asked", count));
  if (drop_last_ && count > size_)
    throw std::invalid_argument(fmt::format(
        "sampler: a batch of {} examples is larger than the dataset ({} examples)", count, size_));
  out.resize(static_cast<size_t>(count));
  switch (kind_) {
    case Kind::random:
      rng_.integers(0, size_, out.data(), count);
      return;
    case Kind::sequential:
      if (position_ + count > size_) position_ = 0;
      for (int64_t k = 0; k < count; ++k) out[k] = position_ + k;
      position_ += count;
      return;
    case Kind::shuffled: {
      int64_t filled = 0;
      while (filled < count) {
        const int64_t left = size_ - position_;
        if (left == 0 || (drop_last_ && filled == 0 && left < count)) {
          ++epoch_;
          position_ = 0;
          permute();
          continue;
        }
        if (filled == 0) batch_epoch_ = epoch_;
        const int64_t take = std::min(count - filled, left);
        std::copy_n(order_.begin() + position_, take, out.begin() + filled);
        position_ += take;
        filled += take;
      }
      return;
    }
    case Kind::torch: {
      if (next_begins_epoch(count)) {
        finish_epoch();  // the last epoch ran to its end (torch's StopIteration)
        begin_epoch();
      }
      batch_epoch_ = epoch_;
      const int64_t take = std::min(count, size_ - position_);
      out.resize(static_cast<size_t>(take));
      std::copy_n(order_.begin() + position_, take, out.begin());
      position_ += take;
      if (take < count) finish_epoch();  // the short last batch reached the sampler's end
      return;
    }
  }
}

json::Value Sampler::description() const {
  json::Value v;
  v["kind"] = kind_ == Kind::random       ? "random"
              : kind_ == Kind::sequential ? "sequential"
              : kind_ == Kind::shuffled   ? "shuffled"
                                          : "torch";
  v["size"] = size_;
  v["seed"] = static_cast<int64_t>(seed_);
  v["drop_last"] = drop_last_;
  if (kind_ == Kind::torch) {
    v["shuffle"] = shuffle_;
    v["generator"] = generator_ ? "own" : "default";
  }
  return v;
}

namespace {
constexpr char kSamplerMagic[8] = {'D', 'G', 'S', 'A', 'M', 'P', '0', '1'};

uint64_t fnv1a(const uint8_t* bytes, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}
void put(std::vector<uint8_t>& out, uint64_t value) {
  const auto* b = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), b, b + sizeof value);
}
}  // namespace

// magic, kind, size, seed, drop_last, epoch, position, rng bytes (length first), checksum.
std::vector<uint8_t> Sampler::state() const {
  std::vector<uint8_t> out(kSamplerMagic, kSamplerMagic + 8);
  for (uint64_t v : {static_cast<uint64_t>(kind_), static_cast<uint64_t>(size_), seed_,
                     static_cast<uint64_t>(drop_last_), static_cast<uint64_t>(epoch_),
                     static_cast<uint64_t>(position_)})
    put(out, v);
  const std::vector<uint8_t> rng = kind_ == Kind::torch ? torch_state() : rng_.state();
  put(out, rng.size());
  out.insert(out.end(), rng.begin(), rng.end());
  put(out, fnv1a(out.data(), out.size()));
  return out;
}

void Sampler::set_state(const std::vector<uint8_t>& blob) {
  constexpr size_t kFixed = 8 + 7 * 8;  // magic, six words, rng length
  if (blob.size() < kFixed + 8)
    throw std::invalid_argument(fmt::format("sampler state: {} bytes, too short", blob.size()));
  if (std::memcmp(blob.data(), kSamplerMagic, 8) != 0)
    throw std::invalid_argument("sampler state: bad magic (not a depthgrad sampler state)");
  uint64_t word[7];
  std::memcpy(word, blob.data() + 8, sizeof word);
  if (word[6] != blob.size() - kFixed - 8)
    throw std::invalid_argument(
        fmt::format("sampler state: the RNG part claims {} bytes, {} are there", word[6],
                    blob.size() - kFixed - 8));
  uint64_t checksum = 0;
  std::memcpy(&checksum, blob.data() + blob.size() - 8, 8);
  if (checksum != fnv1a(blob.data(), blob.size() - 8))
    throw std::invalid_argument("sampler state: checksum mismatch (the state is damaged)");
  if (word[0] != static_cast<uint64_t>(kind_) || word[1] != static_cast<uint64_t>(size_) ||
      word[2] != seed_ || word[3] != static_cast<uint64_t>(drop_last_))
    throw std::invalid_argument(fmt::format(
        "sampler state: written for another stream (kind {}, {} examples, seed {}, drop_last {}) "
        "than this one ({})",
        word[0], word[1], word[2], word[3], json::dump(description())));
  const int64_t epoch = static_cast<int64_t>(word[4]), position = static_cast<int64_t>(word[5]);
  if (epoch < 0 || position < 0 || position > size_)
    throw std::invalid_argument(
        fmt::format("sampler state: epoch {} position {} is outside a dataset of {} examples",
                    epoch, position, size_));
  const std::vector<uint8_t> part(blob.begin() + kFixed, blob.end() - 8);
  if (kind_ == Kind::torch) {
    set_torch_state(part, epoch, position);
    return;
  }
  NumpyGenerator rng = rng_;
  rng.set_state(part);
  rng_ = rng;
  epoch_ = epoch;
  position_ = position;
  if (kind_ == Kind::shuffled) permute();
}

// torch_order's part of the state: the own generator's state and the epoch's source, each with
// its length first (0: none).
std::vector<uint8_t> Sampler::torch_state() const {
  std::vector<uint8_t> out;
  put(out, tail_draw_pending_ ? 1 : 0);
  for (const std::vector<uint8_t>& part :
       {generator_ ? generator_->state() : std::vector<uint8_t>(), epoch_source_}) {
    put(out, part.size());
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

void Sampler::set_torch_state(const std::vector<uint8_t>& part, int64_t epoch, int64_t position) {
  std::vector<uint8_t> pieces[2];
  uint64_t pending = 0;
  if (part.size() < 8)
    throw std::invalid_argument("sampler state: the torch order's part is truncated");
  std::memcpy(&pending, part.data(), 8);
  if (pending > 1 || (pending == 1 && !generator_))
    throw std::invalid_argument("sampler state: the torch order's pending draw is invalid");
  size_t at = 8;
  for (std::vector<uint8_t>& piece : pieces) {
    uint64_t n = 0;
    if (part.size() - at < 8)
      throw std::invalid_argument("sampler state: the torch order's part is truncated");
    std::memcpy(&n, part.data() + at, 8);
    at += 8;
    if (n > part.size() - at)
      throw std::invalid_argument("sampler state: the torch order's part is truncated");
    piece.assign(part.begin() + static_cast<std::ptrdiff_t>(at),
                 part.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  if (pieces[0].empty() != !generator_ || (shuffle_ && epoch > 0) == pieces[1].empty())
    throw std::invalid_argument(
        "sampler state: the torch order's generator or epoch source does not fit this sampler");
  std::optional<TorchGenerator> own = generator_;
  if (own) own->set_state(pieces[0]);
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[i] = i;
  if (!pieces[1].empty()) {  // redraw the epoch's permutation from its source
    TorchGenerator source(0);
    source.set_state(pieces[1]);
    std::swap(order_, order);
    torch_permute(source);
  } else {
    order_ = std::move(order);
  }
  generator_ = own;
  tail_draw_pending_ = pending == 1;
  epoch_source_ = pieces[1];
  epoch_ = epoch;
  position_ = position;
}

// ---- DataLoader

DataLoader::DataLoader(const Dataset& data, Sampler sampler, int64_t batch, int64_t num_workers,
                       int64_t prefetch_factor)
    : data_(data),
      sampler_(std::move(sampler)),
      batch_(batch),
      num_workers_(num_workers),
      prefetch_factor_(prefetch_factor) {
  if (batch < 1)
    throw std::invalid_argument(fmt::format("DataLoader: batch must be >= 1, got {}", batch));
  if (num_workers < 0)
    throw std::invalid_argument(
        fmt::format("DataLoader: num_workers must be >= 0, got {}", num_workers));
  if (prefetch_factor < 1)
    throw std::invalid_argument(
        fmt::format("DataLoader: prefetch_factor must be >= 1, got {}", prefetch_factor));
  if (sampler_.size() != data.size())
    throw std::invalid_argument(
        fmt::format("DataLoader: the sampler covers {} examples, the dataset has {}",
                    sampler_.size(), data.size()));
}

DataLoader::DataLoader(const Dataset& data, const DataLoaderOptions& options)
    : DataLoader(
          data,
          Sampler::torch_order(data.size(), options.shuffle, options.drop_last, options.generator),
          options.batch_size, options.num_workers, options.prefetch_factor) {
  collate_fn_ = options.collate_fn;
  if (collate_fn_ && !dynamic_cast<const MapDataset*>(&data))
    throw std::invalid_argument(
        "DataLoader: a collate_fn needs a map-style dataset (a MapDataset, whose examples it "
        "collates); this dataset fills its batches itself");
  if (options.drop_last && options.batch_size > data.size())
    throw std::invalid_argument(fmt::format(
        "DataLoader: drop_last with batch_size {} larger than the dataset ({} examples) gives no "
        "batch at all",
        options.batch_size, data.size()));
}

DataLoader::DataLoader(const DataLoader& other)
    : data_(other.data_),
      sampler_(other.sampler_),
      batch_(other.batch_),
      num_workers_(other.num_workers_),
      prefetch_factor_(other.prefetch_factor_),
      collate_fn_(other.collate_fn_) {}

DataLoader::~DataLoader() = default;

void DataLoader::next(Batch& out) {
  sampler_.next(batch_, indices_);
  if (num_workers_ == 0) {
    fill(indices_, sampler_.epoch_key(), out);
    return;
  }
  if (!prefetcher_)
    prefetcher_ = std::make_unique<BatchPrefetcher>(
        [this](std::span<const int64_t> indices, const EpochKey& key, Batch& batch) {
          fill(indices, key, batch);
        },
        num_workers_, num_workers_ * prefetch_factor_);
  if (!prefetcher_->take(indices_, sampler_.epoch_key(), out)) ahead_ = sampler_;
  prefetch();
}

void DataLoader::fill(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const {
  if (collate_fn_)
    static_cast<const MapDataset&>(data_).fill_epoch(indices, key, collate_fn_, out);
  else
    data_.fill_epoch(indices, key, out);
}

// Draws the batches after the one given from a copy of the sampler (ahead_, which is where the
// last queued batch ends) and queues them; in torch order, not past the epoch's end.
void DataLoader::prefetch() {
  std::vector<int64_t> indices;
  while (prefetcher_->queued() < prefetcher_->depth()) {
    if (!ahead_->can_draw_ahead(batch_)) return;
    ahead_->next(batch_, indices);
    prefetcher_->submit(indices, ahead_->epoch_key());
  }
}

int64_t DataLoader::size() const {
  if (sampler_.kind() != Sampler::Kind::torch)
    throw std::invalid_argument(
        "DataLoader: made from a Sampler, it is an endless stream without epochs (no len, no "
        "range-for); make it with DataLoaderOptions to iterate epochs");
  return sampler_.batches_per_epoch(batch_);
}

DataLoader::iterator DataLoader::begin() {
  const int64_t n = size();  // refused on a stream
  sampler_.restart_epoch();
  if (n > 0) next(current_);
  return iterator(this, 0);
}

DataLoader::iterator& DataLoader::iterator::operator++() {
  if (++index_ < loader_->size())
    loader_->next(loader_->current_);
  else
    loader_->sampler_.finish_epoch();  // the loop's end: torch's sampler runs to its end
  return *this;
}

void for_each_batch(const Dataset& data, int64_t batch,
                    const std::function<void(const Batch&)>& fn) {
  if (batch < 1)
    throw std::invalid_argument(fmt::format("for_each_batch: batch must be >= 1, got {}", batch));
  Batch b;
  std::vector<int64_t> indices;
  for (int64_t first = 0; first < data.size(); first += batch) {
    const int64_t n = std::min(batch, data.size() - first);
    indices.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) indices[k] = first + k;
    data.fill(indices, b);
    fn(b);
  }
}

}  // namespace dg
