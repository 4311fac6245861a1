// The sum over ranks of the flat gradient, bucket by bucket along a chain in rank order, while
// backward runs (see gradient_reducer.h).
#include "train/gradient_reducer.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tensor/kernels_elementwise.h"

namespace dg {

namespace {
constexpr int kChainTag = 1;  // a partial sum, rank r to rank r + 1
constexpr int kFinalTag = 2;  // the finished sum, rank N-1 to the bucket's owner

// Adds the seconds a scope takes to `total`.
class AddSeconds {
 public:
  explicit AddSeconds(double& total) : total_(total) {}
  ~AddSeconds() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  AddSeconds(const AddSeconds&) = delete;
  AddSeconds& operator=(const AddSeconds&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

GradientReducer::GradientReducer(const FlatParameters& flat, Collectives& world,
                                 std::vector<int64_t> bounds, int64_t bucket_elements,
                                 bool release_sent_gradients)
    : gradients_(flat.gradients),
      world_(world),
      bounds_(std::move(bounds)),
      release_(release_sent_gradients),
      rank_(world.rank()),
      ranks_(world.size()) {
  if (bucket_elements < 1)
    throw std::invalid_argument(
        fmt::format("gradient reducer: bucket_elements must be >= 1, got {}", bucket_elements));
  if (ranks_ < 2 || static_cast<int>(bounds_.size()) != ranks_ + 1 || bounds_.back() != flat.total)
    throw std::invalid_argument(
        fmt::format("gradient reducer: needs 2 or more ranks and {} shard bounds ending at {}",
                    ranks_ + 1, flat.total));
  if (flat.gradients.dtype() != DType::f32)
    throw std::invalid_argument("gradient reducer: the gradients must be float32");
  // Buckets: each shard cut into pieces of at most bucket_elements, in flat order.
  int64_t largest = 0;
  for (int r = 0; r < ranks_; ++r)
    for (int64_t lo = bounds_[r]; lo < bounds_[r + 1]; lo += bucket_elements) {
      const int64_t hi = std::min(lo + bucket_elements, bounds_[r + 1]);
      buckets_.push_back(Bucket{lo, hi, r, 0});
      largest = std::max(largest, hi - lo);
    }
  // Which buckets each parameter lies in.
  buckets_of_slot_.resize(flat.slots.size());
  for (size_t s = 0; s < flat.slots.size(); ++s) {
    const int64_t lo = flat.slots[s].offset, hi = lo + flat.slots[s].numel;
    auto first = std::upper_bound(buckets_.begin(), buckets_.end(), lo,
                                  [](int64_t at, const Bucket& b) { return at < b.end; });
    for (auto b = first; b != buckets_.end() && b->begin < hi; ++b)
      buckets_of_slot_[s].push_back(static_cast<int>(b - buckets_.begin()));
  }
  if (rank_ > 0) buffers_.assign(kInFlight, std::vector<float>(static_cast<size_t>(largest)));
}

float* GradientReducer::gradient(const Bucket& b) const {
  return gradients_.data<float>() + b.begin;
}

namespace {
// Gives the whole pages inside [begin, end) back to the system (they read as zeros when next
// touched; Linux's MADV_DONTNEED on private memory) and returns them as [first, last) (empty
// at begin when there is none).
std::pair<float*, float*> give_back_whole_pages(float* begin, float* end) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<uintptr_t>(begin), b = reinterpret_cast<uintptr_t>(end);
  const uintptr_t first = (a + page - 1) / page * page, last = b / page * page;
  if (last <= first) return {begin, begin};
  madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return {reinterpret_cast<float*>(first), reinterpret_cast<float*>(last)};
}
}  // namespace

void release_to_zeros(float* begin, float* end) {
  const auto [first, last] = give_back_whole_pages(begin, end);
  if (first == last) return std::fill(begin, end, 0.0f);
  std::fill(begin, first, 0.0f);
  std::fill(last, end, 0.0f);
}

// The pages wholly inside bucket b of the gradient buffer go back to the system, so this rank's
// resident gradients shrink to what it still needs.
void GradientReducer::release(const Bucket& b) const {
  float* g = gradient(b);
  give_back_whole_pages(g, g + (b.end - b.begin));
}

void GradientReducer::arm(const float* local_sum) {
  for (Bucket& b : buckets_) b.pending_slots = 0;
  for (const std::vector<int>& in : buckets_of_slot_)
    for (int b : in) ++buckets_[b].pending_slots;
  chains_.assign(buckets_.size(), Chain{});
  free_buffers_.clear();
  for (int i = static_cast<int>(buffers_.size()) - 1; i >= 0; --i) free_buffers_.push_back(i);
  next_step_ = next_receive_ = next_final_ = finished_front_ = finished_ = 0;
  local_sum_ = local_sum;
  seconds_ = 0;
  armed_ = true;
  AddSeconds timed(seconds_);
  post_receives();
}

void GradientReducer::slot_ready(size_t slot) {
  if (!armed_) return;
  AddSeconds timed(seconds_);
  for (int b : buckets_of_slot_.at(slot)) --buckets_[b].pending_slots;
  advance();
}

void GradientReducer::finish() {
  if (!armed_) throw std::logic_error("gradient reducer: finish() without arm()");
  AddSeconds timed(seconds_);
  for (Bucket& b : buckets_) b.pending_slots = 0;
  while (finished_ < chains_.size()) {
    const size_t before = finished_ + next_step_ + next_final_;
    advance();
    if (finished_ + next_step_ + next_final_ == before)
      std::this_thread::yield();  // waiting on another rank
  }
  armed_ = false;
}

// Position p of the fixed order is bucket (buckets - 1 - p): from the end of the flat buffer.
void GradientReducer::post_receives() {
  if (rank_ == 0) return;
  while (next_receive_ < chains_.size() && !free_buffers_.empty()) {
    Chain& c = chains_[next_receive_];
    const Bucket& b = buckets_[buckets_.size() - 1 - next_receive_];
    c.buffer = free_buffers_.back();
    free_buffers_.pop_back();
    c.receive =
        world_.start_receive(buffers_[c.buffer].data(), b.end - b.begin, rank_ - 1, kChainTag);
    ++next_receive_;
  }
}

// This rank's link of bucket p's chain, when it can run now: (g_0 + … + g_{r-1}) + g_r, passed
// to the next rank, or from the last rank to the owner.
bool GradientReducer::chain_step(size_t p) {
  Chain& c = chains_[p];
  const Bucket& b = buckets_[buckets_.size() - 1 - p];
  if (b.pending_slots > 0) return false;
  if (rank_ > 0 && (c.receive < 0 || !world_.done(c.receive))) return false;
  c.receive = -1;
  const int64_t n = b.end - b.begin;
  float* g = gradient(b);
  if (local_sum_) {  // the earlier micro-batches' sum + this one's, as the accumulation adds
    const float* sum = local_sum_ + b.begin;
#pragma omp parallel for simd schedule(static) if (parallel : n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) g[i] = sum[i] + g[i];
  }
  const int last = ranks_ - 1;
  if (rank_ == 0) {
    c.send = world_.start_send(g, n, 1, kChainTag);
  } else {
    float* partial = buffers_[c.buffer].data();
#pragma omp parallel for simd schedule(static) if (parallel : n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) partial[i] += g[i];
    if (rank_ < last) {
      c.send = world_.start_send(partial, n, rank_ + 1, kChainTag);
    } else if (b.owner != rank_) {
      c.send = world_.start_send(partial, n, b.owner, kFinalTag);
    } else {
      std::memcpy(g, partial, static_cast<size_t>(n) * sizeof(float));
      free_buffers_.push_back(c.buffer);
      c.buffer = -1;
    }
    if (release_ && b.owner != rank_) release(b);  // g was read: its pages are no longer needed
  }
  c.awaits_final = b.owner == rank_ && rank_ != last;  // the sum comes back from the last rank
  return true;
}

void GradientReducer::advance() {
  post_receives();
  while (next_step_ < chains_.size() && chain_step(next_step_)) ++next_step_;
  // Sends complete in any order: each frees its partial-sum buffer (rank 0 sends from the
  // gradients themselves, which it can give back now unless it owns them).
  for (size_t p = finished_front_; p < next_step_; ++p) {
    Chain& c = chains_[p];
    if (c.send < 0 || !world_.done(c.send)) continue;
    c.send = -1;
    if (c.buffer >= 0) free_buffers_.push_back(c.buffer), c.buffer = -1;
    const Bucket& b = buckets_[buckets_.size() - 1 - p];
    if (rank_ == 0 && release_ && b.owner != 0) release(b);
  }
  // The finished sums' receives are posted in the fixed order (messages under one tag match in
  // the order posted), each once the owner's own values have left: they land on them.
  while (next_final_ < next_step_) {
    Chain& c = chains_[next_final_];
    const Bucket& b = buckets_[buckets_.size() - 1 - next_final_];
    if (c.awaits_final) {
      if (c.send >= 0) break;
      c.final_receive = world_.start_receive(gradient(b), b.end - b.begin, ranks_ - 1, kFinalTag);
      c.awaits_final = false;
    }
    ++next_final_;
  }
  for (size_t p = finished_front_; p < next_final_; ++p) {
    Chain& c = chains_[p];
    if (c.done || c.send >= 0) continue;
    if (c.final_receive >= 0) {
      if (!world_.done(c.final_receive)) continue;
      c.final_receive = -1;
    }
    c.done = true;
    ++finished_;
  }
  while (finished_front_ < chains_.size() && chains_[finished_front_].done) ++finished_front_;
  post_receives();
}

}  // namespace dg
