// Data for any task: numbered examples (a Dataset), the order they are taken in (a Sampler) and
// batches of them (Batch, DataLoader).
//  - TensorDataset: tensors that share their first dimension (features and targets, images and
//    labels, ...); example i is row i of each.
//  - TokenWindows: a language model's windows over one token-id array; example i is the window
//    starting at i·stride, as inputs ids[s : s+T] and targets ids[s+1 : s+T+1].
//  - Sampler: random with replacement (the reference's numpy draws), sequential, or shuffled by
//    epochs (seeded permutations, drop-last or not). Its position and RNG are a small state blob
//    that training checkpoints save and resume restores, so a resumed run sees the same examples.
// The training loop (train/trainer.h) draws each step's global batch from its sampler in one
// call and cuts it into micro-batches in that fixed order, so ranks and accumulation see the same
// examples in the same places whatever the layout.
// It does not read files or tokenize (train/lm/data/corpus.h, train/lm/text/bpe.h,
// train/data/ do). Examples made on request (decoded, augmented) are train/data/example.h's
// MapDataset; a DataLoader with num_workers fills batches ahead on threads (train/data/prefetch.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/rng.h"
#include "tensor/tensor.h"
#include "train/io/json.h"

namespace dg {

// The examples of one (micro-)batch: one tensor per field of the dataset, each [n, ...].
struct Batch {
  std::vector<Tensor> tensors;
  std::vector<int64_t> indices;  // the examples, in order
  const Tensor& operator[](size_t field) const;
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

// out.tensors[field] as a tensor of `shape` and `dtype`, for Dataset::fill implementations: the
// one already there when it fits and nobody else holds it (a tensor a caller kept from an earlier
// batch is never overwritten), else a new one. Grows out.tensors to field + 1 when needed.
Tensor& batch_field(Batch& out, size_t field, const Shape& shape, DType dtype);

// One example of a map-style dataset (train/data/example.h): its fields (an image and its label,
// ...), each a tensor; a label is an int64 0-dim tensor.
using Example = std::vector<Tensor>;
// torch's collate_fn: makes `out` from the examples (and their indices), as collate does by
// default (train/data/example.h).
using CollateFunction =
    std::function<void(std::span<const Example>, std::span<const int64_t>, Batch&)>;

// Which epoch of which run a batch's examples are drawn in: a dataset with random transforms
// seeds each example's draws from (seed, epoch, index) (see train/data/example.h).
struct EpochKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool operator==(const EpochKey&) const = default;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  // examples
  // Fills out.tensors with the examples `indices` (each in [0, size())); out's tensors are
  // reused when their shapes fit, so a loop that fills one Batch allocates once.
  virtual void fill(std::span<const int64_t> indices, Batch& out) const = 0;
  // As fill, for examples drawn in epoch key.epoch of a run seeded key.seed: what the loaders
  // call. A dataset whose examples are random (augmentation, MapDataset) draws them from the key;
  // the others ignore it (the default: fill). Loaders with workers call it from several threads
  // at once, so it (and fill) must not change the dataset.
  virtual void fill_epoch(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const {
    (void)key;
    fill(indices, out);
  }
  // Tokens per example, for tokens/s in progress lines (1 unless the examples are sequences).
  virtual int64_t tokens_per_example() const { return 1; }
};

// Rows of tensors sharing their first dimension (any dtype; views are copied contiguous once).
//   dg::TensorDataset data({features /*[N, F]*/, targets /*[N]*/});
class TensorDataset final : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);  // throws naming a mismatched tensor
  int64_t size() const override { return rows_; }
  void fill(std::span<const int64_t> indices, Batch& out) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t rows_ = 0;
};

// Windows of seq_len tokens: example i starts at s = i·stride; fields: inputs int64 [n, T] and
// targets int64 [n, T] (the inputs shifted by one; the int32 ids widened, as torch's indices).
// Every window with s + T + 1 <= len is an example, unless `count` caps them. An lvalue ids vector
// is read in place and must outlive the dataset; a moved one or a shared_ptr is kept alive by it.
class TokenWindows final : public Dataset {
 public:
  TokenWindows(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride,
               int64_t count = -1);
  TokenWindows(std::vector<int32_t>&& ids, int64_t seq_len, int64_t stride, int64_t count = -1);
  TokenWindows(std::shared_ptr<const std::vector<int32_t>> ids, int64_t seq_len, int64_t stride,
               int64_t count = -1);
  // Windows drawn as a numpy training script draws them: every start in [0, len − T − 1), which
  // leaves out the last full window as numpy's integers(0, len − T − 1) does. With
  // Sampler::random this is its draw, bit for bit.
  static TokenWindows reference(const std::vector<int32_t>& ids, int64_t seq_len);
  // Consecutive non-overlapping windows: starts 0, T, 2T, … (stride T).
  static TokenWindows consecutive(const std::vector<int32_t>& ids, int64_t seq_len);

  int64_t size() const override { return count_; }
  void fill(std::span<const int64_t> indices, Batch& out) const override;
  int64_t tokens_per_example() const override { return seq_len_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t stride() const { return stride_; }
  int64_t start(int64_t index) const { return index * stride_; }
  const std::vector<int32_t>& ids() const { return *ids_; }

 private:
  std::shared_ptr<const std::vector<int32_t>> owned_;
  const std::vector<int32_t>* ids_;
  int64_t seq_len_, stride_, count_;
};

// Which examples come next. A value type: copy it to branch a stream, compare description()s to
// see whether two samplers are the same stream.
class Sampler {
 public:
  enum class Kind { random, sequential, shuffled, torch };
  // Draws with replacement, uniform over [0, size): numpy default_rng(seed).integers(0, size, n),
  // the reference's batch draw.
  static Sampler random(int64_t size, uint64_t seed);
  // 0, 1, 2, …; a batch that would run past the end starts again at 0 (the tail is dropped).
  static Sampler sequential(int64_t size);
  // Epochs of seeded permutations of [0, size). drop_last: a batch never spans two epochs (an
  // epoch's tail shorter than a batch is skipped, as PyTorch's drop_last=True); otherwise a batch
  // takes the tail and continues with the next epoch's permutation, so no example is skipped.
  static Sampler shuffled(int64_t size, uint64_t seed, bool drop_last = true);
  // torch 1.13 DataLoader's order, epoch by epoch: next(count) with the same count every call
  // gives the batches of torch's DataLoader(batch_size=count, shuffle, drop_last, generator). A
  // batch never spans two epochs: the epoch's last batch is shorter when size is not a multiple
  // of count (drop_last false; next() then returns fewer indices) or skipped (drop_last true).
  // At each epoch's start it draws as torch's DataLoader iterator does: one 64-bit base seed from
  // the generator, then with shuffle torch.randperm(size) from it. `generator` is copied (the
  // sampler draws from its own copy, as a value type must; torch draws from the one given, so
  // other draws from it in between would move torch's order); null: the default generator
  // (dg::default_generator(), torch's global one: after manual_seed(s) on both sides, the same
  // order as torch's DataLoader without a generator, which seeds a fresh generator for each
  // epoch's permutation from a second draw). Nothing is drawn until the first next(). torch's
  // RandomSampler draws one more randperm(size) when an epoch is run to its end (not when it is
  // left part-way); with an own generator this does too (finish_epoch), so next() across epochs
  // gives the batches of for loops over torch's loader run to their end.
  static Sampler torch_order(int64_t size, bool shuffle, bool drop_last,
                             const TorchGenerator* generator = nullptr);
  // Makes the next next() begin a new epoch (torch's iter(loader) on a loader part-way through
  // one); nothing when no epoch has begun or the current one is finished. torch_order only.
  void restart_epoch();
  // The draw torch's RandomSampler makes when its epoch is run to the end (one more
  // randperm(size) from an own generator); next() makes it before beginning the next epoch and
  // after an epoch's short last batch, a DataLoader's range-for at its end. torch_order only.
  void finish_epoch();

  // The next `count` example indices (count > 0; a shuffled or sequential sampler with
  // drop_last needs count <= size). Appends nothing else: `out` is overwritten.
  void next(int64_t count, std::vector<int64_t>& out);

  // The EpochKey of the batch the last next() gave (see Dataset::fill_epoch): the sampler's seed
  // (torch_order: its generator's initial seed; the default generator's when none was given)
  // and the epoch the batch's first example was drawn in (shuffled, torch_order; 0 for random and
  // sequential samplers, whose repeated examples get the same draws: augment with a shuffled one).
  EpochKey epoch_key() const { return {augment_seed_, batch_epoch_}; }
  // Whether a copy of this sampler may draw next(count) ahead of it (the loaders' workers do): not
  // when, in torch order, it would begin an epoch, whose draws may come from the default
  // generator, which a copy shares.
  bool can_draw_ahead(int64_t count) const;

  Kind kind() const { return kind_; }
  int64_t size() const { return size_; }
  int64_t epoch() const { return epoch_; }        // shuffled, torch_order: epochs begun; else 0
  int64_t position() const { return position_; }  // index into the epoch (or the sequence)
  // Batches of `batch` examples in one epoch (torch's len(loader)): size / batch rounded down
  // with drop_last, up without it. torch_order only.
  int64_t batches_per_epoch(int64_t batch) const;
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  // {"kind", "size", "seed", "drop_last"} (torch_order adds "shuffle" and "generator"): what a
  // checkpoint's stream must match on resume.
  json::Value description() const;
  // Position, epoch and RNG as a versioned, checksummed blob; set_state throws
  // std::invalid_argument naming what is wrong (size, magic, position past the end, checksum).
  std::vector<uint8_t> state() const;
  void set_state(const std::vector<uint8_t>& blob);

 private:
  Sampler(Kind kind, int64_t size, uint64_t seed, bool drop_last);
  void permute();                         // shuffled: order_ = the permutation of epoch_
  void begin_epoch();                     // torch_order: the draws of an epoch's start
  void torch_permute(TorchGenerator& g);  // order_ = torch.randperm(size_, generator=g)
  std::vector<uint8_t> torch_state() const;
  bool next_begins_epoch(int64_t count) const;  // torch_order: next(count) begins an epoch
  void set_torch_state(const std::vector<uint8_t>& part, int64_t epoch, int64_t position);
  Kind kind_;
  int64_t size_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0, position_ = 0;
  NumpyGenerator rng_;          // random's draws
  std::vector<int64_t> order_;  // shuffled, torch_order: this epoch's order
  // torch_order: whether to shuffle, the own generator (when one was given), and the state of the
  // generator that drew this epoch's permutation just before it did (a resume redraws it).
  bool shuffle_ = false;
  std::optional<TorchGenerator> generator_;
  std::vector<uint8_t> epoch_source_;
  bool tail_draw_pending_ = false;  // finish_epoch's draw is still to be made
  uint64_t augment_seed_ = 0;       // epoch_key()'s seed
  int64_t batch_epoch_ = 0;         // epoch_key()'s epoch
};

// torch.utils.data.DataLoader's settings (its defaults).
struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  // Copied (see Sampler::torch_order); null: the default generator, as torch's generator=None.
  const TorchGenerator* generator = nullptr;
  // Threads filling batches ahead of the one being used (train/data/prefetch.h); 0: each batch is
  // filled on the calling thread when asked for. Any count gives the same batches, bit for bit.
  int64_t num_workers = 0;
  // Batches each worker keeps ready (queued at most num_workers × prefetch_factor), as torch's.
  int64_t prefetch_factor = 2;
  // torch's collate_fn, for a MapDataset (train/data/example.h); null: collate (stacking).
  CollateFunction collate_fn = nullptr;
};

class BatchPrefetcher;

// A dataset cut into batches, as torch's DataLoader (default collation: each field stacked along
// a new first dimension; worker threads instead of worker processes).
//  - Made with DataLoaderOptions: epochs in torch 1.13's order (Sampler::torch_order: the same
//    batches as torch's DataLoader with the same settings, reshuffled at each epoch's start). A
//    range-for runs one epoch, as `for xb, yb in loader` does (each begins a new epoch, even if
//    the last one was left part-way); size() is len(loader); with drop_last false the epoch's
//    last batch is shorter, with true it is dropped; no batch spans two epochs. next() gives the
//    batch after the last one given, beginning the next epoch after an epoch's last batch (so
//    next() called size() times is one epoch, the same batches as a range-for).
//  - Made with a Sampler: next() fills the sampler's next `batch` examples forever (a stream,
//    as the training loop draws; a shuffled sampler without drop_last spans epochs). It has no
//    epochs: a range-for and size() are refused.
//  - With num_workers > 0, threads fill the next batches while the caller uses this one
//    (train/data/prefetch.h); the batches are the same as without workers, bit for bit, and
//    each is made with the EpochKey of its epoch (random transforms: train/data/example.h). In
//    torch order the workers do not run ahead into the next epoch (its first draws may come
//    from the default generator). A worker's exception reaches the caller's next().
// The dataset must outlive the loader.
//   dg::DataLoader loader(data, {.batch_size = 32, .shuffle = true, .generator = &g,
//                                .num_workers = 2});
//   for (const dg::Batch& batch : loader) { /* batch[0] [≤32, F], batch[1] [≤32] */ }
class DataLoader {
 public:
  DataLoader(const Dataset& data, const DataLoaderOptions& options);
  DataLoader(const Dataset& data, Sampler sampler, int64_t batch, int64_t num_workers = 0,
             int64_t prefetch_factor = 2);
  // A copy has the same settings and position and its own workers (started on its first batch).
  DataLoader(const DataLoader& other);
  DataLoader& operator=(const DataLoader&) = delete;
  ~DataLoader();
  DataLoader(const Dataset&&,
             const DataLoaderOptions&) = delete;  // a temporary would not outlive it
  DataLoader(const Dataset&&, Sampler, int64_t) = delete;
  void next(Batch& out);
  // len(loader): batches per epoch (torch order only).
  int64_t size() const;
  const Dataset& dataset() const { return data_; }
  Sampler& sampler() { return sampler_; }
  const Sampler& sampler() const { return sampler_; }
  int64_t batch_size() const { return batch_; }
  int64_t num_workers() const { return num_workers_; }
  int64_t prefetch_factor() const { return prefetch_factor_; }
  // The workers' queue (null before the first batch, or without workers): its hits() and misses().
  const BatchPrefetcher* prefetcher() const { return prefetcher_.get(); }

  // One epoch's batches; the Batch it points at is the loader's and is refilled by ++.
  class iterator {
   public:
    const Batch& operator*() const { return loader_->current_; }
    const Batch* operator->() const { return &loader_->current_; }
    iterator& operator++();
    bool operator==(const iterator& other) const { return index_ == other.index_; }
    bool operator!=(const iterator& other) const { return index_ != other.index_; }

   private:
    friend class DataLoader;
    iterator(DataLoader* loader, int64_t index) : loader_(loader), index_(index) {}
    DataLoader* loader_;
    int64_t index_;
  };
  iterator begin();  // begins a new epoch
  iterator end() { return iterator(this, size()); }

 private:
  void prefetch();  // queues the batches after the one just given, up to the queue's depth
  void fill(std::span<const int64_t> indices, const EpochKey& key, Batch& out) const;

  const Dataset& data_;
  Sampler sampler_;  // at the batch given last: what sampler() shows and checkpoints keep
  int64_t batch_;
  int64_t num_workers_ = 0, prefetch_factor_ = 2;
  CollateFunction collate_fn_;
  std::vector<int64_t> indices_;
  Batch current_;  // the range-for's batch
  // With workers: the batches after the one given last, drawn from a copy of the sampler.
  std::unique_ptr<BatchPrefetcher> prefetcher_;
  std::optional<Sampler> ahead_;
};

// Calls fn(batch) for consecutive batches of up to `batch` examples covering 0 … size−1 once, in
// order (the last one shorter when size is not a multiple): for evaluation passes.
void for_each_batch(const Dataset& data, int64_t batch,
                    const std::function<void(const Batch&)>& fn);

}  // namespace dg
