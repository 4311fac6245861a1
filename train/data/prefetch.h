// Batches made ahead on worker threads, as torch's DataLoader(num_workers=N) makes them in worker
// processes: what DataLoader and the Trainer use when asked for workers.
//
// The owner predicts the batches to come (it draws them from a copy of its sampler) and submits
// them; workers fill them (Dataset::fill_epoch: read, decode, transform, collate) in any order,
// at most `depth` ahead; take() hands them out in submission order. A batch is a function of its
// indices and its EpochKey alone, so the bits are those of filling it on the calling thread
// whatever the number of workers, their timing, or a resume: the queue is a cache. take() checks
// that the oldest queued batch is the one asked for; when it is not (the owner's sampler was
// moved, an epoch restarted, a checkpoint restored), the queue is dropped and the batch is
// filled on the calling thread.
//
// Workers run with one OpenMP thread and without grad. A worker's exception (a file that cannot
// be read, with its name and the example's index) is rethrown by the take() of its batch.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "train/dataset.h"

namespace dg {

// How a batch is made from its indices and key (a dataset's fill_epoch, or a DataLoader's with its
// collate_fn). Called from the workers, several at once.
using FillFunction = std::function<void(std::span<const int64_t>, const EpochKey&, Batch&)>;

class BatchPrefetcher {
 public:
  // `workers` >= 1 threads, at most `depth` >= 1 batches queued. What `fill` reads (the dataset)
  // must outlive it.
  BatchPrefetcher(FillFunction fill, int64_t workers, int64_t depth);
  ~BatchPrefetcher();  // stops the workers; a fill in progress is finished first
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  int64_t depth() const { return depth_; }
  int64_t queued() const;  // batches submitted and not yet taken
  // Queues the batch of `indices` drawn in `key` for a worker.
  void submit(std::vector<int64_t> indices, const EpochKey& key);
  // The batch of `indices` drawn in `key`, into `out`: the oldest queued one when it is that batch
  // (waiting for its worker); otherwise the queue is dropped and the batch filled here. True when
  // it came from the queue. out's previous tensors go back to the workers for reuse.
  bool take(std::span<const int64_t> indices, const EpochKey& key, Batch& out);
  void clear();  // drops every queued batch (a worker busy on one finishes it unseen)
  // take()s served from the queue, and those filled on the calling thread (the first, an epoch's
  // first in torch order, and each missed prediction): how well the owner predicts.
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Job {
    std::vector<int64_t> indices;
    EpochKey key;
    Batch batch;
    std::exception_ptr error;
    bool done = false;
  };
  void work();

  const FillFunction fill_;
  const int64_t depth_;
  mutable std::mutex mutex_;
  std::condition_variable job_waiting_, job_done_;
  std::deque<std::shared_ptr<Job>> queue_;      // submitted, not taken: oldest first
  std::deque<std::shared_ptr<Job>> unclaimed_;  // of those, the ones no worker has begun
  std::vector<Batch> spare_;                    // batches handed back, for workers to refill
  bool stopping_ = false;
  int64_t hits_ = 0, misses_ = 0;  // the caller's thread's counts
  std::vector<std::thread> workers_;
};

}  // namespace dg
