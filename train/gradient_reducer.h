// GradientReducer: the sum over ranks of the flat gradient, started while backward still runs.
// The flat buffer is cut into buckets (at most `bucket_elements` each, none straddling a shard);
// as soon as backward has finished every parameter of a bucket (a post-accumulate hook on each
// parameter calls slot_ready), the bucket goes down a chain in rank order: rank 0 sends its
// values to rank 1, rank r adds its own (partial + g_r) and passes the sum on, and rank N-1 sends
// the finished sum to the bucket's owner (the rank whose shard holds it). Every element's sum is
// ((g_0 + g_1) + g_2) + …, the order of the reduction after backward (train/data_parallel.h), so
// overlapping changes no bit. Buckets go in one fixed order on every rank, from the end of the
// flat buffer (where backward finishes first) to its start; each rank runs a bucket's chain step
// once that bucket is ready here, its partial sum has arrived, and the buckets before it in that
// order have had theirs.
//
// Progress: the messages are non-blocking point-to-point sends (Collectives::start_send), moved
// on whenever backward finishes a parameter (slot_ready) and, after backward, by finish(), which
// waits for the rest. The time spent in both is communication_seconds().
// Memory: a rank holds at most `kInFlight` partial sums of a bucket at once. With
// release_sent_gradients (ZeRO-2), once a bucket has left this rank and this rank does not own it,
// the pages under it in the gradient buffer are given back to the system (they read as zeros
// when next touched), so the gradients resident on a rank are its shard plus the buckets still
// being summed.
// It does not scale by 1/M, clip, or gather anything: the trainer does (train/trainer.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/module.h"
#include "train/data_parallel.h"

namespace dg {

class GradientReducer {
 public:
  // `bounds`: shard_bounds (train/data_parallel.h) of `flat` over world.size() ranks.
  // It keeps flat.gradients (a handle on the buffer) and the slots' places, not `flat` itself.
  GradientReducer(const FlatParameters& flat, Collectives& world, std::vector<int64_t> bounds,
                  int64_t bucket_elements, bool release_sent_gradients);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before the step's last backward. `local_sum` [flat.total]: this rank's sum of its earlier
  // micro-batches' gradients (each bucket is added to the last one's, sum + g, before it leaves),
  // or null with one micro-batch per rank.
  void arm(const float* local_sum);
  // Slot `slot` of the flat parameters has its final gradient (its post-accumulate hook).
  // Nothing happens unless armed.
  void slot_ready(size_t slot);
  // After the backward: every bucket is ready (a parameter backward never reached has a zero
  // gradient); returns once this rank's shard of flat.gradients holds its sum over the ranks.
  void finish();
  // Seconds spent in slot_ready and finish since arm().
  double communication_seconds() const { return seconds_; }
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Partial sums of buckets this rank can hold at once.
  static constexpr int kInFlight = 8;

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // elements of the flat buffer
    int owner = 0;
    int pending_slots = 0;  // parameters of the bucket whose gradient is not final yet
  };
  // The state of one bucket on this rank during a step, in the fixed order.
  struct Chain {
    int64_t receive = -1, send = -1, final_receive = -1;  // request handles, -1 = none
    int buffer = -1;                                      // the partial-sum buffer it holds
    bool awaits_final = false, done = false;
  };
  void advance();  // moves every chain on as far as it can go without waiting
  void post_receives();
  bool chain_step(size_t order);
  void release(const Bucket& b) const;
  float* gradient(const Bucket& b) const;

  Tensor gradients_;  // [total] the flat gradient buffer
  Collectives& world_;
  std::vector<int64_t> bounds_;
  bool release_;
  int rank_ = 0, ranks_ = 1;
  std::vector<Bucket> buckets_;                    // in flat order
  std::vector<std::vector<int>> buckets_of_slot_;  // the buckets each slot overlaps
  std::vector<Chain> chains_;                      // by position in the fixed order
  std::vector<std::vector<float>> buffers_;        // kInFlight partial sums
  std::vector<int> free_buffers_;
  // Positions in the fixed order: the next chain step, receive and final receive to post, and
  // the first bucket not yet done here.
  size_t next_step_ = 0, next_receive_ = 0, next_final_ = 0, finished_front_ = 0;
  size_t finished_ = 0;  // buckets done here
  const float* local_sum_ = nullptr;
  bool armed_ = false;
  double seconds_ = 0;
};

// Zeroes floats [begin, end) by giving the whole pages among them back to the system (they read
// as zeros and take no memory until written; Linux's MADV_DONTNEED) and writing zeros to the
// partial pages at both ends: how ZeRO-2 empties gradients it does not keep.
void release_to_zeros(float* begin, float* end);

}  // namespace dg
