// Gradient accumulation and data parallelism (see data_parallel.h): shard bounds, the start-up
// checks, and the Trainer's accumulated step, whose bits do not depend on how a step's
// micro-batches are spread over processes.
#include "train/data_parallel.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>

#include "autograd/tape.h"
#include "tensor/kernels_elementwise.h"
#include "train/io/json.h"
#include "train/trainer.h"

namespace dg {

void SingleProcess::gather_to_root(const float* mine, float* full,
                                   const std::vector<int64_t>& bounds) {
  std::memcpy(full, mine, static_cast<size_t>(bounds[1] - bounds[0]) * sizeof(float));
}

std::vector<int64_t> shard_bounds(const FlatParameters& params, int ranks) {
  const GradientNormBlocks blocks = gradient_norm_blocks(params);
  std::vector<int64_t> bounds(ranks + 1, params.total);
  bounds[0] = 0;
  size_t b = 0;
  for (int r = 1; r < ranks; ++r) {
    // Rank r starts at the first block boundary at or after its even share total·r/ranks.
    const int64_t target = params.total * r / ranks;
    while (b < blocks.begin.size() && blocks.begin[b] < target) ++b;
    bounds[r] = b < blocks.begin.size() ? blocks.begin[b] : params.total;
  }
  return bounds;
}

std::pair<size_t, size_t> blocks_within(const GradientNormBlocks& blocks, int64_t begin,
                                        int64_t end) {
  size_t first = 0;
  while (first < blocks.begin.size() && blocks.begin[first] < begin) ++first;
  size_t last = first;
  while (last < blocks.begin.size() && blocks.end[last] <= end && blocks.begin[last] < end) ++last;
  return {first, last};
}

namespace {
// The first leaf where `a` and `b` differ, as "training.lr" (or "" when equal); `mine` and
// `theirs` get the two values ("missing" for an absent key).
std::string first_difference(const json::Value& a, const json::Value& b, const std::string& path,
                             std::string& mine, std::string& theirs) {
  if (a == b) return "";
  if (a.is_object() && b.is_object()) {
    auto name = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    for (const auto& [key, value] : a.as_object()) {
      const json::Value* other = b.find(key);
      if (!other) {
        mine = json::dump(value), theirs = "missing";
        return name(key);
      }
      std::string at = first_difference(value, *other, name(key), mine, theirs);
      if (!at.empty()) return at;
    }
    for (const auto& [key, value] : b.as_object())
      if (!a.find(key)) {
        mine = "missing", theirs = json::dump(value);
        return name(key);
      }
  }
  mine = json::dump(a), theirs = json::dump(b);
  return path.empty() ? "(all)" : path;
}
}  // namespace

void check_same_settings(Collectives& world, const std::string& settings_json) {
  const std::vector<std::string> all = world.all_gather(settings_json);
  const json::Value root = json::parse(all[0], "rank 0's settings");
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const json::Value other = json::parse(all[r], fmt::format("rank {}'s settings", r));
    std::string mine, theirs;
    const std::string key = first_difference(root, other, "", mine, theirs);
    if (key.empty()) continue;
    throw CollectiveError(
        fmt::format("rank {} was started with setting '{}' = {} but rank 0 with {}: every rank "
                    "must run the same settings (refused before any work)",
                    r, key, theirs, mine));
  }
}

std::string parameter_checksum(const FlatParameters& params) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(params.values.data<float>());
  const size_t n = static_cast<size_t>(params.total) * sizeof(float);
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

std::string check_same_parameters(Collectives& world, const FlatParameters& params) {
  const std::string mine = parameter_checksum(params);
  const std::vector<std::string> all = world.all_gather(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw CollectiveError(
          fmt::format("rank {} starts from other parameters (checksum {}) than rank 0 ({})", r,
                      all[r], all[0]));
  return all[0];
}

int64_t checkpoint_global_batch(const SafetensorsFile& file, const json::Value& saved,
                                const std::string& path) {
  if (auto it = file.metadata.find("depthgrad.global_batch"); it != file.metadata.end()) {
    const std::string& text = it->second;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 1)
      throw std::runtime_error(
          fmt::format("{}: metadata 'depthgrad.global_batch' is '{}', expected a positive integer",
                      path, text));
    return value;
  }
  const json::Value* training = saved.is_object() ? saved.find("training") : nullptr;
  const json::Value* batch = training && training->is_object() ? training->find("batch") : nullptr;
  const json::Value* accum = training && training->is_object() ? training->find("accum") : nullptr;
  if (!batch || !batch->is_integer() || (accum && !accum->is_integer()))
    throw std::runtime_error(
        fmt::format("{}: the checkpoint's config has no integer 'training.batch'", path));
  return batch->as_int() * (accum ? accum->as_int() : 1);
}

// ---- the Trainer's accumulated step

void Trainer::setup_data_parallel() {
  if (flat_.values.dtype() != DType::f32)
    throw std::invalid_argument(
        "trainer: accumulation and data parallelism need float32 parameters");
  shard_bounds_ = shard_bounds(flat_, ranks());
  norm_blocks_ = gradient_norm_blocks(flat_);
  if (config_.accum > 1) gradient_sum_ = Tensor::zeros({flat_.total}, DType::f32);
}

// One optimizer step over the global batch: the step's examples are drawn as one process drawing
// ranks × accum × batch would; micro-batch i is examples [i·batch, (i+1)·batch), and rank r runs
// micro-batches r·accum … r·accum + accum − 1. Gradient of the step: (Σ_i g_i) · (1/M), M the
// number of micro-batches, the sum in micro-batch order (local ones first, then across ranks in
// rank order: with accum 1 on N ranks that is exactly one process with accum N).
StepLog Trainer::accumulated_step() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t B = config_.batch, K = config_.accum;
  const int rank = world_ ? world_->rank() : 0;
  const int64_t micro_batches = global_batch() / B;
  sampler_.next(global_batch(), step_indices_);

  float* g = flat_.gradients.data<float>();
  const int64_t n = flat_.total;
  micro_losses_.resize(K);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t micro = rank * K + k;
    data_->fill(std::span<const int64_t>(step_indices_).subspan(micro * B, B), batch_);
    flat_.zero_grad();
    Tensor loss = loss_(*model_, batch_);
    if (!loss.defined() || loss.numel() != 1)
      throw std::invalid_argument(
          fmt::format("trainer: the loss function returned {}, expected one value",
                      loss.defined() ? loss.describe() : std::string("an undefined tensor")));
    backward(loss);
    micro_losses_[k] = loss.item();
    if (K == 1) break;
    float* sum = gradient_sum_.data<float>();
    if (k == 0)
      std::memcpy(sum, g, static_cast<size_t>(n) * sizeof(float));
    else {
#pragma omp parallel for simd schedule(static) if (parallel : n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
    }
  }
  if (K > 1) std::memcpy(g, gradient_sum_.data<float>(), static_cast<size_t>(n) * sizeof(float));

  // Across ranks: each rank ends up with its shard of the sum, then scales it to the mean.
  const int64_t lo = world_ ? shard_bounds_[rank] : 0, hi = world_ ? shard_bounds_[rank + 1] : n;
  if (world_) world_->reduce_scatter_in_rank_order(g, shard_bounds_);
  const float inverse = static_cast<float>(1.0 / static_cast<double>(micro_batches));
#pragma omp parallel for simd schedule(static) if (parallel : hi - lo > kParallelGrain)
  for (int64_t i = lo; i < hi; ++i) g[i] *= inverse;
  const std::vector<double> losses = world_ ? world_->all_gather(micro_losses_) : micro_losses_;
  double loss_sum = 0;
  for (double l : losses) loss_sum += l;  // micro-batch order
  const double value = loss_sum / static_cast<double>(micro_batches);

  ClipResult clip;
  const double lr = config_.schedule.at(step_);
  if (!zero1_ || !world_) {
    if (world_) world_->all_gather(g, shard_bounds_);
    if (config_.clip > 0) clip = clip_grad_norm(flat_, config_.clip);
  } else if (config_.clip > 0) {
    // ZeRO-1: the norm from every block's sum of squares (each computed by the block's owner),
    // then this rank clips its shard.
    auto [first, last] = blocks_within(norm_blocks_, lo, hi);
    std::vector<double> mine(last - first);
    for (size_t b = first; b < last; ++b)
      mine[b - first] = gradient_sum_of_squares(flat_, norm_blocks_.begin[b], norm_blocks_.end[b]);
    const std::vector<double> sums = world_->all_gather(mine);
    if (sums.size() != norm_blocks_.begin.size())
      throw std::logic_error(fmt::format("ZeRO-1: {} block sums gathered for {} blocks",
                                         sums.size(), norm_blocks_.begin.size()));
    const double total = total_norm_from_block_sums(flat_, norm_blocks_, sums.data());
    clip = scale_gradients_for_clip(flat_, total, config_.clip, lo, hi);
  }
  // A non-finite loss or gradient norm stops the run (or skips the step) before the optimizer
  // touches the weights, as train_step does. Both are global values, so every rank decides the
  // same. (Without clipping the norm is not computed here: only the loss is checked.)
  if (!std::isfinite(value) || (config_.clip > 0 && !std::isfinite(clip.total_norm))) {
    const std::string problem = !std::isfinite(value)
                                    ? std::string("the loss is not finite")
                                    : fmt::format("the gradient norm is {}", clip.total_norm);
    return nonfinite_step(value, problem, start);
  }
  optimizer_->step(lr);
  if (zero1_ && world_) world_->all_gather(flat_.values.data<float>(), shard_bounds_);
  return finished_step(value, clip, lr, start);
}

std::unique_ptr<AdamW> Trainer::full_optimizer_state() const {
  // Only rank 0 holds the whole (transiently); the parameters are only read (AdamW's constructor
  // takes them by reference to size itself).
  std::unique_ptr<AdamW> full;
  if (world_->rank() == 0)
    full = std::make_unique<AdamW>(const_cast<FlatParameters&>(flat_), config_.adamw);
  world_->gather_to_root(optimizer_->exp_avg().data<float>(),
                         full ? full->exp_avg().data<float>() : nullptr, shard_bounds_);
  world_->gather_to_root(optimizer_->exp_avg_sq().data<float>(),
                         full ? full->exp_avg_sq().data<float>() : nullptr, shard_bounds_);
  if (full) full->set_steps_taken(optimizer_->steps_taken());
  return full;
}

void Trainer::take_optimizer_shard(AdamW& full) {
  const int64_t lo = optimizer_->shard_begin(), count = optimizer_->shard_end() - lo;
  std::memcpy(optimizer_->exp_avg().data<float>(), full.exp_avg().data<float>() + lo,
              static_cast<size_t>(count) * sizeof(float));
  std::memcpy(optimizer_->exp_avg_sq().data<float>(), full.exp_avg_sq().data<float>() + lo,
              static_cast<size_t>(count) * sizeof(float));
  optimizer_->set_steps_taken(full.steps_taken());
}

}  // namespace dg
