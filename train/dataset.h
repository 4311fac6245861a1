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
// It does not read files or tokenize (train/lm/data/corpus.h, train/lm/text/bpe.h do), and does not
// load data in background threads: filling a batch is a copy of rows.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
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

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  // examples
  // Fills out.tensors with the examples `indices` (each in [0, size())); out's tensors are
  // reused when their shapes fit, so a loop that fills one Batch allocates once.
  virtual void fill(std::span<const int64_t> indices, Batch& out) const = 0;
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
  enum class Kind { random, sequential, shuffled };
  // Draws with replacement, uniform over [0, size): numpy default_rng(seed).integers(0, size, n),
  // the reference's batch draw.
  static Sampler random(int64_t size, uint64_t seed);
  // 0, 1, 2, …; a batch that would run past the end starts again at 0 (the tail is dropped).
  static Sampler sequential(int64_t size);
  // Epochs of seeded permutations of [0, size). drop_last: a batch never spans two epochs (an
  // epoch's tail shorter than a batch is skipped, as PyTorch's drop_last=True); otherwise a batch
  // takes the tail and continues with the next epoch's permutation, so no example is skipped.
  static Sampler shuffled(int64_t size, uint64_t seed, bool drop_last = true);

  // The next `count` example indices (count > 0; a shuffled or sequential sampler with
  // drop_last needs count <= size). Appends nothing else: `out` is overwritten.
  void next(int64_t count, std::vector<int64_t>& out);

  Kind kind() const { return kind_; }
  int64_t size() const { return size_; }
  int64_t epoch() const { return epoch_; }        // shuffled: epochs begun; else 0
  int64_t position() const { return position_; }  // index into the epoch (or the sequence)
  // {"kind", "size", "seed", "drop_last"}: what a checkpoint's stream must match on resume.
  json::Value description() const;
  // Position, epoch and RNG as a versioned, checksummed blob; set_state throws
  // std::invalid_argument naming what is wrong (size, magic, position past the end, checksum).
  std::vector<uint8_t> state() const;
  void set_state(const std::vector<uint8_t>& blob);

 private:
  Sampler(Kind kind, int64_t size, uint64_t seed, bool drop_last);
  void permute();  // shuffled: order_ = the permutation of epoch_
  Kind kind_;
  int64_t size_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0, position_ = 0;
  NumpyGenerator rng_;          // random's draws
  std::vector<int64_t> order_;  // shuffled: this epoch's permutation
};

// A dataset, a sampler and a batch size: `next` fills the next batch forever (epochs roll over).
// The dataset must outlive the loader.
//   dg::DataLoader loader(data, dg::Sampler::shuffled(data.size(), 7), 32);
//   dg::Batch batch;
//   loader.next(batch);  // batch[0] [32, F], batch[1] [32]
class DataLoader {
 public:
  DataLoader(const Dataset& data, Sampler sampler, int64_t batch);
  DataLoader(const Dataset&&, Sampler, int64_t) = delete;  // a temporary would not outlive it
  void next(Batch& out);
  const Dataset& dataset() const { return data_; }
  Sampler& sampler() { return sampler_; }
  int64_t batch_size() const { return batch_; }

 private:
  const Dataset& data_;
  Sampler sampler_;
  int64_t batch_;
  std::vector<int64_t> indices_;
};

// Calls fn(batch) for consecutive batches of up to `batch` examples covering 0 … size−1 once, in
// order (the last one shorter when size is not a multiple): for evaluation passes.
void for_each_batch(const Dataset& data, int64_t batch,
                    const std::function<void(const Batch&)>& fn);

}  // namespace dg
