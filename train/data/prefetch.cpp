// Batches made ahead on worker threads (see prefetch.h).
#include "train/data/prefetch.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/tape.h"

namespace dg {

BatchPrefetcher::BatchPrefetcher(FillFunction fill, int64_t workers, int64_t depth)
    : fill_(std::move(fill)), depth_(depth) {
  if (workers < 1 || depth < 1)
    throw std::invalid_argument(fmt::format(
        "BatchPrefetcher: needs at least one worker and one batch of depth, got {} and {}", workers,
        depth));
  workers_.reserve(static_cast<size_t>(workers));
  for (int64_t w = 0; w < workers; ++w) workers_.emplace_back([this] { work(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
    unclaimed_.clear();
  }
  job_waiting_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int64_t BatchPrefetcher::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

void BatchPrefetcher::submit(std::vector<int64_t> indices, const EpochKey& key) {
  auto job = std::make_shared<Job>();
  job->indices = std::move(indices);
  job->key = key;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
    unclaimed_.push_back(std::move(job));
  }
  job_waiting_.notify_one();
}

bool BatchPrefetcher::take(std::span<const int64_t> indices, const EpochKey& key, Batch& out) {
  std::shared_ptr<Job> job;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool hit = !queue_.empty() && queue_.front()->key == key &&
                     std::equal(indices.begin(), indices.end(), queue_.front()->indices.begin(),
                                queue_.front()->indices.end());
    if (hit) {
      job = queue_.front();
      queue_.pop_front();
      job_done_.wait(lock, [&] { return job->done; });
    } else {
      queue_.clear();
      unclaimed_.clear();
    }
  }
  if (!job) {
    ++misses_;
    fill_(indices, key, out);
    return false;
  }
  ++hits_;
  if (job->error) std::rethrow_exception(job->error);
  std::swap(out, job->batch);
  std::lock_guard<std::mutex> lock(mutex_);
  spare_.push_back(std::move(job->batch));  // out's old tensors, refilled when nobody holds them
  return true;
}

void BatchPrefetcher::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.clear();
  unclaimed_.clear();
}

// A worker: one OpenMP thread (an op in a transform must not start a team on this thread while
// the training step runs its own), no tape; then jobs until stopped.
void BatchPrefetcher::work() {
  omp_set_num_threads(1);
  NoGradGuard no_grad;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    job_waiting_.wait(lock, [&] { return stopping_ || !unclaimed_.empty(); });
    if (stopping_) return;
    std::shared_ptr<Job> job = unclaimed_.front();
    unclaimed_.pop_front();
    if (!spare_.empty()) {
      job->batch = std::move(spare_.back());
      spare_.pop_back();
    }
    lock.unlock();
    try {
      fill_(job->indices, job->key, job->batch);
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    job->done = true;
    job_done_.notify_all();
  }
}

}  // namespace dg
