// The resumable training loop of any Module (see trainer.h): construction and its checks, and
// train_step in its named steps (draw, forward-backward, reduce, check and clip, update,
// schedule). The checkpoints are in trainer_checkpoint.cpp.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <span>

#include "autograd/tape.h"
#include "tensor/bf16_weights.h"
#include "tensor/kernels_elementwise.h"
#include "tensor/rng.h"
#include "train/checkpoint.h"
#include "train/training_config.h"

namespace dg {

TrainingDiverged::TrainingDiverged(int64_t step_, double loss_, const std::string& problem)
    : std::runtime_error(
          fmt::format("training diverged at step {} (0-based): loss {}, {}; stopped before the "
                      "optimizer step (--skip-nonfinite skips such steps instead)",
                      step_, loss_, problem)),
      step(step_),
      loss(loss_) {}

// ---- the loop

Trainer::Trainer(TrainingSetup s, const TrainingConfig& config)
    : model_(std::move(s.model)),
      data_(std::move(s.data)),
      sampler_(std::move(s.sampler)),
      loss_(std::move(s.loss)),
      model_config_(std::move(s.config)),
      training_record_(std::move(s.training_record)),
      resume_keys_(std::move(s.resume_keys)),
      config_(config),
      optimizer_(std::move(s.optimizer)),
      scheduler_(std::move(s.scheduler)),
      world_(s.world) {
  set_loader_workers(s.loader_workers, s.prefetch_factor);
  check_settings();
  check_training_record();
  check_precision_supported(config_.precision, "trainer: training.precision");
  flat_ = flatten_parameters(*model_);
  check_trainable_parameters();
  attach_optimizer();
  check_short_last_batch();
  prepare_micro_batches_and_ranks();
  // bf16: the weights are rounded once per optimiser step into a copy beside them
  // (tensor/bf16_weights.h), not on every GEMM that reads them.
  if (config_.precision == MatmulPrecision::bf16 && flat_.values.dtype() == DType::f32)
    keep_bf16_copy(flat_.values);
  if (world_ && config_.overlap && world_->point_to_point()) make_reducer(kGradientBucketElements);
  if (world_ && config_.zero == 2) zero_gradients();  // ZeRO-2 holds no gradient between steps
  // The parameters' first buffers (replaced by views into the flat buffer) and init's scratch
  // sit in the storage cache in sizes the steps never ask for: give them back to the system.
  storage_cache_clear();
}

// The setup's parts are there and the loop's settings are in range.
void Trainer::check_settings() {
  if (!model_) throw std::invalid_argument("trainer: the model is null");
  if (!data_) throw std::invalid_argument("trainer: the dataset is null");
  if (!loss_) throw std::invalid_argument("trainer: no loss function given");
  if (!optimizer_) throw std::invalid_argument("trainer: no optimizer given");
  if (world_ && world_->size() == 1) world_ = nullptr;  // a group of one is one process
  if (config_.accum < 1)
    throw std::invalid_argument(fmt::format("trainer: accum must be >= 1, got {}", config_.accum));
  if (config_.batch < 1)
    throw std::invalid_argument(fmt::format("trainer: batch must be >= 1, got {}", config_.batch));
  if (config_.steps < 0)
    throw std::invalid_argument(fmt::format("trainer: steps must be >= 0, got {}", config_.steps));
  if (config_.zero < 0 || config_.zero > 2)
    throw std::invalid_argument(
        fmt::format("trainer: zero must be 0, 1 or 2, got {}", config_.zero));
  if (sampler_.size() != data_->size())
    throw std::invalid_argument(
        fmt::format("trainer: the sampler covers {} examples, the dataset has {}", sampler_.size(),
                    data_->size()));
}

// The flat buffers hold every parameter that requires grad (frozen ones, a LoRA model's base, are
// left out), and at least one.
void Trainer::check_trainable_parameters() const {
  if (flat_.total == 0)
    throw std::invalid_argument(model_->parameter_count() == 0
                                    ? "trainer: the model has no parameters"
                                    : "trainer: every parameter of the model is frozen "
                                      "(requires_grad false): nothing would train");
  std::set<const TensorImpl*> in_slots;
  for (const auto& slot : flat_.slots) in_slots.insert(slot.parameter.impl());
  for (const auto& [name, p] : model_->named_parameters())
    if (p.requires_grad() && !in_slots.count(p.impl()))
      throw std::invalid_argument(fmt::format(
          "trainer: parameter '{}' requires grad but is outside the flat buffers (it was unfrozen "
          "after flat_parameters() was made); set requires_grad before building the optimiser",
          name));
}

// The caller's fuller training record, when given, must agree with the loop's settings.
void Trainer::check_training_record() const {
  if (training_record_.is_null()) return;
  const json::Value loop = training_config_json(config_);
  for (const auto& [key, value] : loop.as_object()) {
    const json::Value* recorded =
        training_record_.is_object() ? training_record_.find(key) : nullptr;
    if (!recorded || !(*recorded == value))
      throw std::invalid_argument(
          fmt::format("trainer: the training record's '{}' is {}, the loop's setting is {}", key,
                      recorded ? json::dump(*recorded) : "missing", json::dump(value)));
  }
}

// An optimiser made from tensors or parameter groups of this model moves onto its flat buffer
// (each parameter keeping its group's rate and weight decay): from here on it is a flat one.
// (The module's own FlatParameters, not this copy: the optimiser may outlive the Trainer.)
void Trainer::attach_optimizer() {
  if (!optimizer_->flat_parameters()) optimizer_->use_flat_buffer(model_->flat_parameters());
  const FlatParameters* over = optimizer_->flat_parameters();
  if (!over || over->values.storage() != flat_.values.storage())
    throw std::invalid_argument(fmt::format(
        "trainer: the optimizer {} is not over the model's flat buffers (make it from the model, "
        "or from model.flat_parameters())",
        optimizer_->name()));
  if (optimizer_->shard_begin() != 0 || optimizer_->shard_end() != flat_.total)
    throw std::invalid_argument(fmt::format(
        "trainer: the optimizer {} is already sharded (the trainer shards it for ZeRO-1)",
        optimizer_->name()));
}

// The torch order's short last batch of an epoch is one step's whole batch: it cannot be cut
// into micro-batches of `batch`.
void Trainer::check_short_last_batch() const {
  if (sampler_.kind() == Sampler::Kind::torch && !sampler_.drop_last() &&
      data_->size() % global_batch() != 0 && global_batch() != config_.batch)
    throw std::invalid_argument(fmt::format(
        "trainer: the data's epochs end in a short batch ({} examples, batches of {}), which "
        "cannot be split over {} rank(s) x 'training.accum' {}; use drop_last, or accum 1 in one "
        "process",
        data_->size(), global_batch(), ranks(), config_.accum));
}

// Accumulation's gradient sum, the ranks' shards and norm blocks, and with ZeRO-1 (or 2) this
// rank's shard of the optimizer's state.
void Trainer::prepare_micro_batches_and_ranks() {
  sharded_ = config_.zero >= 1 && world_;
  if (accumulates()) {
    if (flat_.values.dtype() != DType::f32)
      throw std::invalid_argument(
          "trainer: accumulation and data parallelism need float32 parameters");
    if (config_.accum > 1) gradient_sum_ = Tensor::zeros({flat_.total}, DType::f32);
  }
  if (world_) {
    shard_bounds_ = shard_bounds(flat_, ranks());
    norm_blocks_ = gradient_norm_blocks(flat_);
  }
  if (sharded_) {  // this rank keeps and updates its shard of the optimizer's state
    if (!optimizer_->shardable())
      throw std::invalid_argument(fmt::format(
          "trainer: training.zero {} shards the optimizer's state over the ranks, but optimizer "
          "'{}' cannot be sharded (use zero 0)",
          config_.zero, optimizer_->name()));
    optimizer_->shard(shard_bounds_[world_->rank()], shard_bounds_[world_->rank() + 1]);
  }
}

void Trainer::check_loader_batch(int64_t batch_size) const {
  if (sampler_.kind() != Sampler::Kind::torch)
    throw std::invalid_argument(
        "trainer: the DataLoader was made from a Sampler; give the dataset and the sampler "
        "instead, or make the loader with DataLoaderOptions");
  if (batch_size != global_batch())
    throw std::invalid_argument(fmt::format(
        "trainer: the DataLoader's batch_size is {}, the step's global batch is {} ({} rank(s) x "
        "'training.accum' {} x 'training.batch' {}); they must be equal",
        batch_size, global_batch(), ranks(), config_.accum, config_.batch));
}

void Trainer::make_reducer(int64_t bucket_elements) {
  auto reducer = std::make_unique<GradientReducer>(flat_, *world_, shard_bounds_, bucket_elements,
                                                   config_.zero == 2);
  for (HookHandle& h : reducer_hooks_.handles) h.remove();
  reducer_hooks_.handles.clear();
  reducer_ = std::move(reducer);
  // Each parameter tells the reducer when backward has finished its gradient.
  for (size_t s = 0; s < flat_.slots.size(); ++s)
    reducer_hooks_.handles.push_back(flat_.slots[s].parameter.register_post_accumulate_grad_hook(
        [reducer = reducer_.get(), s](const Tensor&) { reducer->slot_ready(s); }));
}

void Trainer::set_bucket_elements(int64_t elements) {
  if (elements < 1)
    throw std::invalid_argument(
        fmt::format("trainer: the bucket size must be >= 1 element, got {}", elements));
  if (reducer_) make_reducer(elements);
}

int64_t Trainer::global_batch() const { return ranks() * config_.accum * config_.batch; }

namespace {
// The index of the first slot of `flat` whose elements of `buffer` within [lo, hi) are not all
// finite, or -1.
int64_t first_nonfinite_slot(const FlatParameters& flat, const Tensor& buffer, int64_t lo,
                             int64_t hi) {
  return dispatch_float(buffer.dtype(), "trainer", [&]<class T>() -> int64_t {
    const T* data = buffer.data<T>();
    for (size_t s = 0; s < flat.slots.size(); ++s) {
      const int64_t a = std::max(lo, flat.slots[s].offset),
                    b = std::min(hi, flat.slots[s].offset + flat.slots[s].numel);
      for (int64_t i = a; i < b; ++i)
        if (!std::isfinite(data[i])) return static_cast<int64_t>(s);
    }
    return -1;
  });
}
}  // namespace

std::string Trainer::first_nonfinite(const Tensor& buffer, bool sharded) const {
  int64_t slot = -1;
  if (!sharded) {
    slot = first_nonfinite_slot(flat_, buffer, 0, flat_.total);
  } else {  // each rank searches its shard; the lowest rank's find is the first in flat order
    const int rank = world_->rank();
    const std::vector<double> found = world_->all_gather(std::vector<double>{static_cast<double>(
        first_nonfinite_slot(flat_, buffer, shard_bounds_[rank], shard_bounds_[rank + 1]))});
    for (double f : found)
      if (f >= 0) {
        slot = static_cast<int64_t>(f);
        break;
      }
  }
  return slot < 0 ? std::string() : flat_.slots[slot].name;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

// Each micro-batch starts from zero gradients. With ZeRO-2 over ranks the buffer's pages are
// given back instead of written (they read as zeros), so the gradients resident on a rank are
// only those backward has written and the reduction has not yet sent away.
void Trainer::zero_gradients() {
  if (world_ && config_.zero == 2) {
    float* g = flat_.gradients.data<float>();
    release_to_zeros(g, g + flat_.total);
  } else {
    flat_.zero_grad();
  }
}

// The sum over ranks in rank order: bucket by bucket while backward ran (the reducer), or now
// in one reduce-scatter. Either way this rank's shard of the gradients holds the sum; with
// ZeRO-2 the rest is given back to the system.
void Trainer::reduce_over_ranks() {
  const auto t0 = std::chrono::steady_clock::now();
  const int rank = world_->rank();
  float* g = flat_.gradients.data<float>();
  if (reducer_) {
    const double during_backward = reducer_->communication_seconds();
    reducer_->finish();
    reduction_wait_seconds_ = seconds_since(t0);
    communication_seconds_ += during_backward;
  } else {
    world_->reduce_scatter_in_rank_order(g, shard_bounds_);
    reduction_wait_seconds_ = seconds_since(t0);
    if (config_.zero == 2) {
      release_to_zeros(g, g + shard_bounds_[rank]);
      release_to_zeros(g + shard_bounds_[rank + 1], g + flat_.total);
    }
  }
  communication_seconds_ += seconds_since(t0);
}

// One optimizer step over the global batch, in named steps: draw the step's examples;
// forward-backward each of this rank's micro-batches; reduce their gradients (over the
// micro-batches and the ranks, to the mean); check for a non-finite loss or gradient and clip;
// update the weights; schedule the next rate. The observer (set_observer) is called at the points
// StepObserver names.
StepLog Trainer::train_step() {
  MatmulPrecisionScope precision(config_.precision);
  const DetectAnomalyGuard anomaly(config_.detect_anomaly || anomaly_enabled());
  const auto start = std::chrono::steady_clock::now();
  draw();
  communication_seconds_ = reduction_wait_seconds_ = 0;
  const bool stopped_early = !forward_backward();
  reduce(stopped_early);
  const double loss = step_loss();
  ClipResult clip;
  const std::string problem = check_and_clip(loss, clip);
  if (!problem.empty()) {
    flat_.zero_grad();
    return nonfinite_step(loss, problem, start);
  }
  const double lr = optimizer_->lr();
  update();
  schedule();
  return finished_step(loss, clip, lr, start);
}

// Draw: the step's examples, drawn as one process drawing ranks × accum × batch would.
// Micro-batch i is examples [i·batch, (i+1)·batch), and rank r runs micro-batches
// r·accum … r·accum + accum − 1.
void Trainer::draw() {
  sampler_.next(global_batch(), step_indices_);
  if (observer_) observer_->after_draw(*this, step_indices_);
}

void Trainer::set_loader_workers(int64_t workers, int64_t prefetch_factor) {
  if (workers < 0 || prefetch_factor < 1)
    throw std::invalid_argument(
        fmt::format("trainer: loader_workers must be >= 0 and prefetch_factor >= 1, got {} and {}",
                    workers, prefetch_factor));
  prefetcher_.reset();
  ahead_.reset();
  loader_workers_ = workers;
  prefetch_factor_ = prefetch_factor;
}

std::span<const int64_t> Trainer::micro_batch(std::span<const int64_t> all, int64_t micro) const {
  const int64_t B = config_.batch;
  // One micro-batch: the whole step (an epoch's last batch may be short, torch order).
  return global_batch() / B == 1 ? all : all.subspan(micro * B, B);
}

void Trainer::fill_micro_batch(int64_t k) {
  const std::span<const int64_t> indices = micro_batch(step_indices_, rank() * config_.accum + k);
  if (loader_workers_ == 0) {
    data_->fill_epoch(indices, sampler_.epoch_key(), batch_);
    return;
  }
  if (!prefetcher_)
    prefetcher_ = std::make_unique<BatchPrefetcher>(
        [data = data_](std::span<const int64_t> indices, const EpochKey& key, Batch& out) {
          data->fill_epoch(indices, key, out);
        },
        loader_workers_, loader_workers_ * prefetch_factor_);
  if (prefetcher_->take(indices, sampler_.epoch_key(), batch_)) {
    prefetch(-1);
  } else {  // nothing queued, or not this (a resume, a moved sampler): predict from here
    ahead_ = sampler_;
    prefetch(k);
  }
}

void Trainer::prefetch(int64_t from_current) {
  const int64_t K = config_.accum, first = rank() * K;
  for (int64_t k = from_current + 1; from_current >= 0 && k < K; ++k) {
    const std::span<const int64_t> part = micro_batch(step_indices_, first + k);
    prefetcher_->submit(std::vector<int64_t>(part.begin(), part.end()), sampler_.epoch_key());
  }
  std::vector<int64_t> drawn;
  while (prefetcher_->queued() + K <= std::max(prefetcher_->depth(), K)) {
    if (!ahead_->can_draw_ahead(global_batch())) return;
    ahead_->next(global_batch(), drawn);
    for (int64_t k = 0; k < K; ++k) {
      const std::span<const int64_t> part = micro_batch(drawn, first + k);
      prefetcher_->submit(std::vector<int64_t>(part.begin(), part.end()), ahead_->epoch_key());
    }
  }
}

// Forward-backward of this rank's micro-batches in order, their gradients added up in
// micro-batch order (in gradient_sum_, or for the last one by the reducer as it sends). With one
// micro-batch the gradient is the backward's. False when a loss in one process is not finite: the
// step stops before that backward (over ranks every rank runs every collective, and the decision
// is taken later on the gathered loss).
bool Trainer::forward_backward() {
  const int64_t K = config_.accum;
  micro_losses_.assign(K, 0.0);
  for (int64_t k = 0; k < K; ++k) {
    if (!forward_backward_micro_batch(k)) return false;
    if (K == 1 || (reducer_ && k == K - 1)) break;
    add_to_gradient_sum(k);
  }
  return true;
}

// Micro-batch k of this rank: zero the gradients, forward and loss, backward. False (no
// backward: the step's graph is freed with the loss) when its loss is not finite in one process.
bool Trainer::forward_backward_micro_batch(int64_t k) {
  const int64_t K = config_.accum;
  fill_micro_batch(k);
  zero_gradients();
  Tensor loss = loss_(*model_, batch_);
  if (!loss.defined() || loss.numel() != 1)
    throw std::invalid_argument(
        fmt::format("trainer: the loss function returned {}, expected one value",
                    loss.defined() ? loss.describe() : std::string("an undefined tensor")));
  micro_losses_[k] = loss.item();
  if (!world_ && !std::isfinite(micro_losses_[k])) return false;
  // The last micro-batch's backward feeds the reducer, which adds the earlier ones' sum to each
  // bucket before it leaves (sum + g, as add_to_gradient_sum adds).
  if (reducer_ && k == K - 1) reducer_->arm(K > 1 ? gradient_sum_.data<float>() : nullptr);
  backward(loss);
  return true;
}

// gradient_sum_ = g (k = 0) or += g: the micro-batches' gradients in micro-batch order.
void Trainer::add_to_gradient_sum(int64_t k) {
  const int64_t n = flat_.total;
  float* g = flat_.gradients.data<float>();
  float* sum = gradient_sum_.data<float>();
  if (k == 0)
    std::memcpy(sum, g, static_cast<size_t>(n) * sizeof(float));
  else {
#pragma omp parallel for simd schedule(static) if (parallel : n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
  }
}

// Reduce: the gradient of the step is (Σ_i g_i) · (1/M), M the number of micro-batches, the sum
// in micro-batch order (local ones first, then across ranks in rank order: with accum 1 on N
// ranks that is exactly one process with accum N). Each rank ends up with its shard of the sum,
// then scales it to the mean. With M = 1 (one process, accum 1) there is no sum and no scaling.
void Trainer::reduce(bool stopped_early) {
  const int64_t n = flat_.total;
  if (!stopped_early && config_.accum > 1 && !reducer_)
    std::memcpy(flat_.gradients.data<float>(), gradient_sum_.data<float>(),
                static_cast<size_t>(n) * sizeof(float));
  if (world_) reduce_over_ranks();
  if (!stopped_early && observer_) observer_->after_reduce(*this, flat_.gradients);
  const int64_t micro_batches = global_batch() / config_.batch;
  if (micro_batches > 1) {
    const int64_t lo = world_ ? shard_bounds_[rank()] : 0,
                  hi = world_ ? shard_bounds_[rank() + 1] : n;
    float* g = flat_.gradients.data<float>();
    const float inverse = static_cast<float>(1.0 / static_cast<double>(micro_batches));
#pragma omp parallel for simd schedule(static) if (parallel : hi - lo > kParallelGrain)
    for (int64_t i = lo; i < hi; ++i) g[i] *= inverse;
  }
}

// The step's loss: the mean of the micro-batch losses over the ranks, added in micro-batch order.
double Trainer::step_loss() {
  const int64_t micro_batches = global_batch() / config_.batch;
  if (micro_batches == 1) return micro_losses_[0];
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<double> losses = world_ ? world_->all_gather(micro_losses_) : micro_losses_;
  communication_seconds_ += seconds_since(t0);
  double loss_sum = 0;
  for (double l : losses) loss_sum += l;  // micro-batch order
  return loss_sum / static_cast<double>(micro_batches);
}

// Check and clip: a non-finite loss or gradient stops the run (or, when skipping, this step)
// before the optimizer touches the weights: the model stays as the last finite step left it.
// Returns what is not finite, "" when all is. The loss and the norm are global values and the
// searches agree over ranks, so every rank decides the same.
std::string Trainer::check_and_clip(double loss, ClipResult& clip) {
  if (!std::isfinite(loss)) {
    const std::string weight = first_nonfinite(flat_.values, false);
    return weight.empty() ? std::string("every weight is finite: the forward overflowed")
                          : fmt::format("parameter '{}' is not finite", weight);
  }
  clip = clip_gradients();
  // With clipping the gradient norm is computed anyway: a non-finite gradient makes it
  // non-finite, and only then are the gradients searched for the first bad one.
  const bool norm_finite = config_.clip <= 0 || std::isfinite(clip.total_norm);
  const std::string gradient =
      config_.clip > 0 && norm_finite ? std::string() : first_nonfinite(flat_.gradients, sharded_);
  if (!gradient.empty()) return fmt::format("the gradient of '{}' is not finite", gradient);
  if (!norm_finite) return fmt::format("the gradient norm overflows ({})", clip.total_norm);
  return {};
}

// Clipping by the global norm (when config.clip > 0). Unsharded over ranks, every rank first
// gathers the whole reduced gradient; sharded, each rank clips its own shard.
ClipResult Trainer::clip_gradients() {
  if (!sharded_) {
    if (world_) {
      const auto t0 = std::chrono::steady_clock::now();
      world_->all_gather(flat_.gradients.data<float>(), shard_bounds_);
      communication_seconds_ += seconds_since(t0);
    }
    return config_.clip > 0 ? clip_grad_norm(flat_, config_.clip) : ClipResult{};
  }
  if (config_.clip <= 0) return {};
  // Sharded: the norm from every block's sum of squares (each computed by the block's owner),
  // then this rank clips its shard.
  const int64_t lo = shard_bounds_[rank()], hi = shard_bounds_[rank() + 1];
  auto [first, last] = blocks_within(norm_blocks_, lo, hi);
  std::vector<double> mine(last - first);
  for (size_t b = first; b < last; ++b)
    mine[b - first] = gradient_sum_of_squares(flat_, norm_blocks_.begin[b], norm_blocks_.end[b]);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<double> sums = world_->all_gather(mine);
  communication_seconds_ += seconds_since(t0);
  if (sums.size() != norm_blocks_.begin.size())
    throw std::logic_error(fmt::format("sharded clip: {} block sums gathered for {} blocks",
                                       sums.size(), norm_blocks_.begin.size()));
  const double total = total_norm_from_block_sums(flat_, norm_blocks_, sums.data());
  return scale_gradients_for_clip(flat_, total, config_.clip, lo, hi);
}

// Update: the optimizer's step; with ZeRO-1 each rank updated its shard, gathered to every rank.
void Trainer::update() {
  optimizer_->step();
  if (sharded_) {
    const auto t0 = std::chrono::steady_clock::now();
    world_->all_gather(flat_.values.mutable_data<float>(), shard_bounds_);
    communication_seconds_ += seconds_since(t0);
  }
}

// Schedule: the learning rate of the next step; the schedule follows the step, taken or skipped.
void Trainer::schedule() {
  if (scheduler_) scheduler_->step();
}

StepLog Trainer::finished_step(double loss, const ClipResult& clip, double lr,
                               std::chrono::steady_clock::time_point start) {
  losses_.push_back(loss);
  grad_norms_.push_back(clip.total_norm);
  clipped_ += clip.clipped ? 1 : 0;
  StepLog log{step_, config_.steps, loss, clip.total_norm, clip.clipped, lr, 0, 0};
  log.skipped_steps = skipped_;
  log.communication_seconds = communication_seconds_;
  log.reduction_wait_seconds = reduction_wait_seconds_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log.tokens_per_second = static_cast<double>(global_batch() * data_->tokens_per_example()) /
                          std::max(log.seconds, 1e-9);
  ++step_;
  if (observer_) observer_->after_step(*this, log);
  return log;
}

StepLog Trainer::nonfinite_step(double loss, const std::string& problem,
                                std::chrono::steady_clock::time_point start) {
  if (!skip_nonfinite_) throw TrainingDiverged(step_, loss, problem);
  ++skipped_;
  StepLog log{step_, config_.steps, loss, 0, false, optimizer_->lr(), 0, 0};
  schedule();
  log.skipped = true;
  log.skipped_steps = skipped_;
  log.communication_seconds = communication_seconds_;
  log.reduction_wait_seconds = reduction_wait_seconds_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++step_;
  if (observer_) observer_->after_step(*this, log);
  return log;
}

double Trainer::wall_seconds() const {
  return prior_wall_seconds_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void Trainer::run(int64_t until, const std::function<void(const StepLog&)>& on_step) {
  until = std::min(until, config_.steps);
  model_->train();
  while (step_ < until) {
    StepLog log = train_step();
    if (on_step) on_step(log);
  }
}

double evaluate_loss(Module& model, const Dataset& data, const LossFunction& loss, int64_t batch) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double sum = 0;
  for_each_batch(data, batch, [&](const Batch& b) {
    sum += loss(model, b).item() * static_cast<double>(b.size());
  });
  model.train(was_training);
  return sum / static_cast<double>(data.size());
}
}  // namespace dg
