// Data-parallel training without MPI in sight: the collectives a Trainer needs from a group of
// processes (an abstract interface; train/dist/ implements it over MPI, SingleProcess is the
// group of one), how the flat parameter buffer is cut into one shard per rank, and the start-up
// checks that every rank runs the same settings from the same parameters.
// It does not start processes or talk to MPI itself (train/dist/world.h does).
//
// Reduction order. The gradient of a step is Σ over its micro-batches in micro-batch order,
// ((g0 + g1) + g2) + …, whether the micro-batches ran in one process (--accum) or on ranks 0, 1,
// 2, … (each owner adds the ranks' copies of its shard in rank order). MPI_Allreduce is never used
// for it: Open MPI picks its algorithm (and so its association order) by size and rank count.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/optim.h"

namespace dg {

// An error every rank raises at the same point with the same message (a refused layout or
// settings): printed once (by rank 0), and the job ends cleanly instead of being aborted.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `bounds` below has size()+1 entries: rank r's shard is elements [bounds[r], bounds[r+1]).
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // On return, rank r's shard of `buffer` holds Σ over ranks q = 0, 1, … (in that order) of rank
  // q's values there; the rest of `buffer` is unspecified. Called by every rank.
  virtual void reduce_scatter_in_rank_order(float* buffer, const std::vector<int64_t>& bounds) = 0;
  // Every rank's shard of `buffer` to every rank (in place).
  virtual void all_gather(float* buffer, const std::vector<int64_t>& bounds) = 0;
  // Rank 0 receives every rank's `mine` ([bounds[r+1] - bounds[r]]) into `full` [bounds.back()]
  // (`full` is ignored elsewhere).
  virtual void gather_to_root(const float* mine, float* full,
                              const std::vector<int64_t>& bounds) = 0;
  // Every rank's values, concatenated in rank order (counts may differ between ranks).
  virtual std::vector<double> all_gather(const std::vector<double>& mine) = 0;
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // A barrier that gives up: true once every rank has called it, false when `seconds` pass first
  // (infinity: wait as long as it takes). For a rank that must not wait forever for one that may
  // never come (it then ends the job). Here: barrier(); MPI waits without spinning a core.
  virtual bool barrier_within(double /*seconds*/) {
    barrier();
    return true;
  }
  // The library's own sum (MPI_Allreduce, MPI_SUM, in place): only for measuring against.
  virtual void all_reduce_sum_any_order(float* buffer, int64_t count) = 0;

  // Non-blocking point-to-point messages, for the reduction that overlaps backward
  // (train/gradient_reducer.h). start_send / start_receive start moving `count` floats to rank
  // `to` / from rank `from` under `tag` and return a handle; done(handle) moves messages on and
  // says whether that one has completed (a handle that said so is spent). A buffer must not be
  // touched until its handle is done. Messages from one rank to another under one tag arrive in
  // the order they were sent. A group without them (the default) says so with point_to_point()
  // false, and the trainer then reduces after backward.
  virtual bool point_to_point() const { return false; }
  virtual int64_t start_send(const float* data, int64_t count, int to, int tag);
  virtual int64_t start_receive(float* data, int64_t count, int from, int tag);
  virtual bool done(int64_t handle);
};

// The group of one process: every collective is the identity.
class SingleProcess final : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void reduce_scatter_in_rank_order(float*, const std::vector<int64_t>&) override {}
  void all_gather(float*, const std::vector<int64_t>&) override {}
  void gather_to_root(const float* mine, float* full, const std::vector<int64_t>& bounds) override;
  std::vector<double> all_gather(const std::vector<double>& mine) override { return mine; }
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  void all_reduce_sum_any_order(float*, int64_t) override {}
};

// One shard per rank, cut at clip_grad_norm's block boundaries (optim/clip.h GradientNormBlocks) so
// every norm block has one owner, with about total/ranks elements each. Ranks may own nothing
// when there are fewer blocks than ranks.
std::vector<int64_t> shard_bounds(const FlatParameters& params, int ranks);
// The blocks of `blocks` that lie inside [begin, end): [first, last).
std::pair<size_t, size_t> blocks_within(const GradientNormBlocks& blocks, int64_t begin,
                                        int64_t end);

// Refuses (CollectiveError naming the rank and the first differing setting, as a dotted path such
// as 'training.lr') unless every rank passed the same settings (a JSON object of what must
// agree). Called by every rank.
void check_same_settings(Collectives& world, const std::string& settings_json);
// Refuses (CollectiveError) unless every rank holds bit-identical parameter values; returns the
// checksum (64-bit FNV-1a of the values' bytes, hex).
std::string check_same_parameters(Collectives& world, const FlatParameters& params);
std::string parameter_checksum(const FlatParameters& params);

// The global batch (windows per step over all ranks) a training checkpoint was written with: its
// 'depthgrad.global_batch' metadata, else (older files) training.batch × training.accum of its
// config `saved`. Throws naming `path` and the key when neither is readable.
int64_t checkpoint_global_batch(const SafetensorsFile& file, const json::Value& saved,
                                const std::string& path);

}  // namespace dg
