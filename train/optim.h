// Optimisers over flat parameter buffers (nn/module.h FlatParameters): AdamW with torch's exact
// update order, SGD with momentum, global-norm gradient clipping, and learning-rate schedules.
// Every update is one pass over contiguous memory per parameter slot; nothing is allocated per
// step after construction. Optimisers do not compute gradients or own the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/module.h"

namespace dg {

// Which parameters weight decay applies to.
enum class DecayPolicy {
  all,           // every parameter (torch AdamW default; the reference's setting)
  matrices_only  // only 2-D weights that are not routes or pseudo-queries (no norms, biases,
                 // routes)
};
DecayPolicy parse_decay_policy(const std::string& text);  // "all" | "matrices"
const char* decay_policy_name(DecayPolicy policy);

struct AdamWConfig {
  double lr = 6e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  DecayPolicy decay = DecayPolicy::all;
};

class AdamW {
 public:
  AdamW(FlatParameters& params, const AdamWConfig& config);
  // Sharded (ZeRO stage 1): keeps m and v for elements [shard_begin, shard_end) of the flat
  // buffer only and updates only those parameters. Each element's update is the unsharded one.
  AdamW(FlatParameters& params, const AdamWConfig& config, int64_t shard_begin, int64_t shard_end);
  // Over the module's own flat buffers (module.flat_parameters()): the usual way.
  AdamW(Module& module, const AdamWConfig& config) : AdamW(module.flat_parameters(), config) {}
  // One update with learning rate `lr` (the schedule's value for this step).
  void step(double lr);
  int64_t steps_taken() const { return step_; }
  // Moments as flat tensors (for checkpoints): [total] each ([shard_end - shard_begin] sharded).
  Tensor& exp_avg() { return m_; }
  Tensor& exp_avg_sq() { return v_; }
  void set_steps_taken(int64_t step) { step_ = step; }
  const AdamWConfig& config() const { return config_; }
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_end() const { return shard_end_; }

 private:
  FlatParameters& params_;
  AdamWConfig config_;
  std::vector<double> slot_decay_;  // weight decay per slot (0 where the policy excludes it)
  Tensor m_, v_;
  int64_t step_ = 0;
  int64_t shard_begin_ = 0, shard_end_ = 0;  // the elements this optimizer updates
};

class SGD {
 public:
  SGD(FlatParameters& params, double momentum = 0.0, double weight_decay = 0.0);
  SGD(Module& module, double momentum = 0.0, double weight_decay = 0.0)
      : SGD(module.flat_parameters(), momentum, weight_decay) {}
  void step(double lr);
  Tensor& momentum_buffer() { return buf_; }

 private:
  FlatParameters& params_;
  double momentum_, weight_decay_;
  Tensor buf_;
  bool first_ = true;
};

// torch.nn.utils.clip_grad_norm_: total = ‖all gradients‖₂; every gradient is multiplied by
// min(1, max_norm / (total + 1e-6)). Returns the pre-clip total norm.
struct ClipResult {
  double total_norm = 0;
  bool clipped = false;  // total_norm > max_norm
};
ClipResult clip_grad_norm(FlatParameters& params, double max_norm);
inline ClipResult clip_grad_norm(Module& module, double max_norm) {
  return clip_grad_norm(module.flat_parameters(), max_norm);
}

// clip_grad_norm in parts, for gradients spread over processes (train/data_parallel.h): the
// flat gradient is cut into blocks (each slot into runs of at most 8192 elements); a block's sum
// of squares depends only on its elements, and the total norm only on the block sums in order, so
// any owner of a block computes the same bits, and clip_grad_norm is these three calls.
struct GradientNormBlocks {
  std::vector<int64_t> begin, end;       // element range of each block, in flat order
  std::vector<size_t> slot_first_block;  // per slot its first block; one past the last at the end
};
GradientNormBlocks gradient_norm_blocks(const FlatParameters& params);
// Σ g² over gradient elements [begin, end) in double, in a fixed order (one block's sum).
double gradient_sum_of_squares(const FlatParameters& params, int64_t begin, int64_t end);
// The total norm from every block's sum (torch's order: per-parameter norms, then their norm).
double total_norm_from_block_sums(const FlatParameters& params, const GradientNormBlocks& blocks,
                                  const double* block_sums);
// Multiplies gradient elements [begin, end) by min(1, max_norm / (total_norm + 1e-6)).
ClipResult scale_gradients_for_clip(FlatParameters& params, double total_norm, double max_norm,
                                    int64_t begin, int64_t end);

// Learning-rate schedules.
struct Schedule {
  enum class Kind { constant, warmup_cosine };
  Kind kind = Kind::constant;
  double lr = 6e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;      // cosine decays to lr·min_lr_ratio
  double at(int64_t step) const;  // step counted from 0
  static Schedule parse(const std::string& kind, double lr, int64_t warmup, int64_t total);
};
Schedule::Kind parse_schedule_kind(const std::string& text);  // "constant" | "cosine"
const char* schedule_kind_name(Schedule::Kind kind);

}  // namespace dg
