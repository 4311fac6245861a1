// The resumable training loop of any Module (see trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
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
  if (!training_record_.is_null()) {  // the caller's fuller record must agree with the loop's
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
  check_precision_supported(config_.precision, "trainer: training.precision");
  flat_ = flatten_parameters(*model_);
  if (flat_.total == 0) throw std::invalid_argument("trainer: the model has no parameters");
  // An optimiser made from tensors or parameter groups of this model moves onto its flat buffer
  // (each parameter keeping its group's rate and weight decay): from here on it is a flat one.
  // (The module's own FlatParameters, not this copy: the optimiser may outlive the Trainer.)
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
  // The torch order's short last batch of an epoch is one step's whole batch: it cannot be cut
  // into micro-batches of `batch`.
  if (sampler_.kind() == Sampler::Kind::torch && !sampler_.drop_last() &&
      data_->size() % global_batch() != 0 && global_batch() != config_.batch)
    throw std::invalid_argument(fmt::format(
        "trainer: the data's epochs end in a short batch ({} examples, batches of {}), which "
        "cannot be split over {} rank(s) x 'training.accum' {}; use drop_last, or accum 1 in one "
        "process",
        data_->size(), global_batch(), ranks(), config_.accum));
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
// Test hook (tests/cli_hardening.sh): DEPTHGRAD_TEST_NONFINITE_STEP=k makes step k's gradient of
// the first parameter NaN, as a spike would. Read once; -1 (unset) costs one compare per step.
int64_t nonfinite_test_step() {
  static const int64_t step = [] {
    const char* value = std::getenv("DEPTHGRAD_TEST_NONFINITE_STEP");
    return value && *value ? std::strtoll(value, nullptr, 10) : int64_t{-1};
  }();
  return step;
}

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

// Test hook: step `nonfinite_test_step()`'s gradient of the first parameter is NaN on rank 0.
void Trainer::poison_first_gradient() {
  dispatch_float(flat_.gradients.dtype(), "trainer", [&]<class T>() {
    flat_.gradients.data<T>()[0] = std::numeric_limits<T>::quiet_NaN();
  });
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
    if (step_ == nonfinite_test_step() && rank == 0) [[unlikely]]
      poison_first_gradient();  // rank 0 owns element 0: as NaN in its local gradient would be
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

// One optimizer step over the global batch: the step's examples are drawn as one process drawing
// ranks × accum × batch would; micro-batch i is examples [i·batch, (i+1)·batch), and rank r runs
// micro-batches r·accum … r·accum + accum − 1. Gradient of the step: (Σ_i g_i) · (1/M), M the
// number of micro-batches, the sum in micro-batch order (local ones first, then across ranks in
// rank order: with accum 1 on N ranks that is exactly one process with accum N). With M = 1 (one
// process, accum 1) there is no sum and no scaling: the gradient is the backward's.
StepLog Trainer::train_step() {
  MatmulPrecisionScope precision(config_.precision);
  const DetectAnomalyGuard anomaly(config_.detect_anomaly || anomaly_enabled());
  const auto start = std::chrono::steady_clock::now();
  const int64_t B = config_.batch, K = config_.accum;
  const int rank = world_ ? world_->rank() : 0;
  const int64_t micro_batches = global_batch() / B;
  sampler_.next(global_batch(), step_indices_);

  const int64_t n = flat_.total;
  micro_losses_.assign(K, 0.0);
  communication_seconds_ = reduction_wait_seconds_ = 0;
  // A non-finite loss in one process stops the step before its backward; over ranks every rank
  // runs every collective, and the decision below is taken on the gathered loss.
  bool stopped_early = false;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t micro = rank * K + k;
    // One micro-batch: the whole step (an epoch's last batch may be short, torch order).
    const std::span<const int64_t> all(step_indices_);
    data_->fill(micro_batches == 1 ? all : all.subspan(micro * B, B), batch_);
    zero_gradients();
    Tensor loss = loss_(*model_, batch_);
    if (!loss.defined() || loss.numel() != 1)
      throw std::invalid_argument(
          fmt::format("trainer: the loss function returned {}, expected one value",
                      loss.defined() ? loss.describe() : std::string("an undefined tensor")));
    micro_losses_[k] = loss.item();
    if (!world_ && !std::isfinite(micro_losses_[k])) {
      stopped_early = true;  // no backward: the step's graph is freed with the loss
      break;
    }
    // The last micro-batch's backward feeds the reducer, which adds the earlier ones' sum to each
    // bucket before it leaves (sum + g, as the loop below adds).
    const bool last = k == K - 1;
    if (reducer_ && last) reducer_->arm(K > 1 ? gradient_sum_.data<float>() : nullptr);
    backward(loss);
    if (K == 1 || (reducer_ && last)) break;
    float* g = flat_.gradients.data<float>();
    float* sum = gradient_sum_.data<float>();
    if (k == 0)
      std::memcpy(sum, g, static_cast<size_t>(n) * sizeof(float));
    else {
#pragma omp parallel for simd schedule(static) if (parallel : n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
    }
  }
  if (!stopped_early && K > 1 && !reducer_)
    std::memcpy(flat_.gradients.data<float>(), gradient_sum_.data<float>(),
                static_cast<size_t>(n) * sizeof(float));
  if (!stopped_early && step_ == nonfinite_test_step() && rank == 0 && !reducer_) [[unlikely]]
    poison_first_gradient();

  // Across ranks: each rank ends up with its shard of the sum, then scales it to the mean.
  const int64_t lo = world_ ? shard_bounds_[rank] : 0, hi = world_ ? shard_bounds_[rank + 1] : n;
  if (world_) reduce_over_ranks();
  if (micro_batches > 1) {
    float* g = flat_.gradients.data<float>();
    const float inverse = static_cast<float>(1.0 / static_cast<double>(micro_batches));
#pragma omp parallel for simd schedule(static) if (parallel : hi - lo > kParallelGrain)
    for (int64_t i = lo; i < hi; ++i) g[i] *= inverse;
  }
  double value = micro_losses_[0];
  if (micro_batches > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<double> losses = world_ ? world_->all_gather(micro_losses_) : micro_losses_;
    communication_seconds_ += seconds_since(t0);
    double loss_sum = 0;
    for (double l : losses) loss_sum += l;  // micro-batch order
    value = loss_sum / static_cast<double>(micro_batches);
  }

  // A non-finite loss or gradient stops the run (or, when skipping, this step) before the
  // optimizer touches the weights: the model stays as the last finite step left it. The loss and
  // the norm are global values and the searches agree over ranks, so every rank decides the same.
  std::string problem;
  ClipResult clip;
  if (!std::isfinite(value)) {
    const std::string weight = first_nonfinite(flat_.values, false);
    problem = weight.empty() ? std::string("every weight is finite: the forward overflowed")
                             : fmt::format("parameter '{}' is not finite", weight);
  } else {
    if (!sharded_) {
      if (world_) {
        const auto t0 = std::chrono::steady_clock::now();
        world_->all_gather(flat_.gradients.data<float>(), shard_bounds_);
        communication_seconds_ += seconds_since(t0);
      }
      if (config_.clip > 0) clip = clip_grad_norm(flat_, config_.clip);
    } else if (config_.clip > 0) {
      // Sharded: the norm from every block's sum of squares (each computed by the block's owner),
      // then this rank clips its shard.
      auto [first, last] = blocks_within(norm_blocks_, lo, hi);
      std::vector<double> mine(last - first);
      for (size_t b = first; b < last; ++b)
        mine[b - first] =
            gradient_sum_of_squares(flat_, norm_blocks_.begin[b], norm_blocks_.end[b]);
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<double> sums = world_->all_gather(mine);
      communication_seconds_ += seconds_since(t0);
      if (sums.size() != norm_blocks_.begin.size())
        throw std::logic_error(fmt::format("sharded clip: {} block sums gathered for {} blocks",
                                           sums.size(), norm_blocks_.begin.size()));
      const double total = total_norm_from_block_sums(flat_, norm_blocks_, sums.data());
      clip = scale_gradients_for_clip(flat_, total, config_.clip, lo, hi);
    }
    // With clipping the gradient norm is computed anyway: a non-finite gradient makes it
    // non-finite, and only then are the gradients searched for the first bad one.
    const bool norm_finite = config_.clip <= 0 || std::isfinite(clip.total_norm);
    const std::string gradient = config_.clip > 0 && norm_finite
                                     ? std::string()
                                     : first_nonfinite(flat_.gradients, sharded_);
    if (!gradient.empty())
      problem = fmt::format("the gradient of '{}' is not finite", gradient);
    else if (!norm_finite)
      problem = fmt::format("the gradient norm overflows ({})", clip.total_norm);
  }
  if (!problem.empty()) {
    flat_.zero_grad();
    return nonfinite_step(value, problem, start);
  }
  const double lr = optimizer_->lr();
  optimizer_->step();
  if (sharded_) {
    const auto t0 = std::chrono::steady_clock::now();
    world_->all_gather(flat_.values.mutable_data<float>(), shard_bounds_);
    communication_seconds_ += seconds_since(t0);
  }
  if (scheduler_) scheduler_->step();
  return finished_step(value, clip, lr, start);
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
  return log;
}

StepLog Trainer::nonfinite_step(double loss, const std::string& problem,
                                std::chrono::steady_clock::time_point start) {
  if (!skip_nonfinite_) throw TrainingDiverged(step_, loss, problem);
  ++skipped_;
  StepLog log{step_, config_.steps, loss, 0, false, optimizer_->lr(), 0, 0};
  if (scheduler_) scheduler_->step();  // the schedule follows the step, taken or skipped
  log.skipped = true;
  log.skipped_steps = skipped_;
  log.communication_seconds = communication_seconds_;
  log.reduction_wait_seconds = reduction_wait_seconds_;
  log.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++step_;
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

// ---- checkpoints

json::Value Trainer::config_json() const {
  json::Value v;
  if (!model_config_.is_null()) v["model"] = model_config_;
  v["training"] = training_record_.is_null() ? training_config_json(config_) : training_record_;
  return v;
}

namespace {
std::vector<uint8_t> pack(const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(double));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
// The trainer's own tensors in a checkpoint ("state.<name>").
constexpr const char* kStateBlobs[] = {"sampler", "generator", "losses", "grad_norms"};
// Metadata of the schedule's state: "depthgrad.scheduler.<name>".
const std::string kSchedulerPrefix = "depthgrad.scheduler.";

// The schedule's state a checkpoint holds, by name (empty for a rule of the step).
std::map<std::string, double> checkpoint_scheduler_state(const SafetensorsFile& file,
                                                         const std::string& path) {
  std::map<std::string, double> state;
  for (const auto& [key, text] : file.metadata) {
    if (key.rfind(kSchedulerPrefix, 0) != 0) continue;
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
      throw std::runtime_error(
          fmt::format("{}: metadata '{}' is '{}', not a number", path, key, text));
    state[key.substr(kSchedulerPrefix.size())] = value;
  }
  return state;
}
}  // namespace

void Trainer::save_checkpoint(const std::string& path,
                              const std::map<std::string, std::string>& metadata) const {
  TrainingState state;
  for (const auto& [key, value] : metadata) {
    if (key.rfind("depthgrad.", 0) == 0)
      throw std::invalid_argument(fmt::format(
          "{}: metadata key '{}' is the trainer's own (keys starting 'depthgrad.' are reserved)",
          path, key));
    state.metadata[key] = value;
  }
  state.metadata["depthgrad.kind"] = "training-checkpoint";
  state.metadata["depthgrad.config"] = json::dump(config_json());
  state.metadata["depthgrad.sampler"] = json::dump(sampler_.description());
  state.metadata["depthgrad.step"] = std::to_string(step_);
  state.metadata["depthgrad.clipped_steps"] = std::to_string(clipped_);
  state.metadata["depthgrad.skipped_steps"] = std::to_string(skipped_);
  state.metadata["depthgrad.wall_seconds"] = fmt::format("{}", wall_seconds());
  state.metadata["depthgrad.global_batch"] = std::to_string(global_batch());
  // A schedule's own state (ReduceLROnPlateau's), in round-trip decimal; a rule of the step has
  // none.
  if (scheduler_)
    for (const auto& [key, value] : scheduler_->state())
      state.metadata[kSchedulerPrefix + key] = fmt::format("{}", value);
  if (!optimizer_->slot_groups().empty())
    state.metadata["depthgrad.optimizer_groups"] = json::dump(optimizer_groups_json());
  state.blobs["sampler"] = sampler_.state();
  state.blobs["generator"] = default_generator().state();
  state.blobs["losses"] = pack(losses_);
  state.blobs["grad_norms"] = pack(grad_norms_);
  const OptimizerState optimizer = full_optimizer_state();  // collective with ZeRO-1
  // The optimizer steps taken: an optimiser's scalar "step" when it has one (checked on resume).
  if (!optimizer.scalars.count("step"))
    state.metadata["depthgrad.optimizer_step"] = std::to_string(step_ - skipped_);
  // The model's persistent buffers (BatchNorm's running statistics) are saved with its weights.
  // Under data parallelism each rank normalises by its own micro-batch and updates its own running
  // statistics, as torch's DDP without SyncBatchNorm; depthgrad does not broadcast buffers (torch's
  // broadcast_buffers), so ranks' statistics differ and the checkpoint holds rank 0's, which every
  // rank loads on resume.
  if (!world_) return save_training_checkpoint(path, *model_, optimizer, state);
  if (world_->rank() == 0) save_training_checkpoint(path, *model_, optimizer, state);
  world_->barrier();  // complete on disk before any rank goes on
}

// The optimiser's parameter groups (made from groups): each group's weight decay and the names
// of its parameters; null when made from the module (one group).
json::Value Trainer::optimizer_groups_json() const {
  const std::vector<size_t>& slot_groups = optimizer_->slot_groups();
  if (slot_groups.empty()) return json::Value();
  std::vector<json::Value> groups(optimizer_->param_groups().size());
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g]["weight_decay"] = *optimizer_->param_groups()[g].weight_decay;
    groups[g]["parameters"] = json::Value(json::Array{});
  }
  for (size_t s = 0; s < slot_groups.size(); ++s)
    if (slot_groups[s] != SIZE_MAX)
      groups[slot_groups[s]]["parameters"].as_array().push_back(json::Value(flat_.slots[s].name));
  json::Value all = json::Value(json::Array{});
  for (json::Value& g : groups) all.as_array().push_back(std::move(g));
  return all;
}

OptimizerState Trainer::full_optimizer_state() const {
  OptimizerState state = optimizer_state(*optimizer_);
  if (!sharded_) return state;
  // Only rank 0 holds the whole (transiently).
  for (auto& [name, tensor] : state.elements) {
    Tensor full = world_->rank() == 0 ? Tensor::zeros({flat_.total}, DType::f32) : Tensor();
    world_->gather_to_root(tensor.data<float>(), full.defined() ? full.data<float>() : nullptr,
                           shard_bounds_);
    tensor = full;
  }
  return state;
}

namespace {
// Metadata `key` of a training checkpoint, or an error naming the file and the key.
const std::string& checkpoint_metadata(const SafetensorsFile& file, const std::string& path,
                                       const char* key) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end())
    throw std::runtime_error(fmt::format(
        "{}: metadata '{}' is missing (not a depthgrad training checkpoint?)", path, key));
  return it->second;
}

// Refuses a checkpoint of another model or run before anything changes: the caller's model
// config, the global batch (its split over ranks × accum × batch may change), the seed, the matmul
// precision (absent means float32), the caller's extra resume keys and the data stream.
void check_checkpoint_matches(const SafetensorsFile& file, const std::string& path,
                              const Trainer& trainer, const std::vector<std::string>& resume_keys) {
  json::Value saved = json::parse(checkpoint_metadata(file, path, "depthgrad.config"),
                                  path + " (depthgrad.config)");
  json::Value mine = trainer.config_json();
  auto field = [](const json::Value& config, const char* section,
                  const char* key) -> const json::Value* {
    const json::Value* s = config.is_object() ? config.find(section) : nullptr;
    return s && s->is_object() ? (key ? s->find(key) : s) : s;
  };
  // The global batch must agree; how it is split (ranks × accum × batch) may change on resume.
  const int64_t saved_global = checkpoint_global_batch(file, saved, path);
  if (saved_global != trainer.global_batch())
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint's global batch {} differs from this run's global batch {} ({} "
        "rank(s) x 'training.accum' {} x 'training.batch' {})",
        path, saved_global, trainer.global_batch(), trainer.ranks(), trainer.config().accum,
        trainer.config().batch));
  // The matmul precision too (absent means float32): a run resumed in another precision
  // would not continue the run's bits.
  const json::Value float32 = json::Value("float32");
  std::vector<std::pair<const char*, const char*>> keys{
      {"model", nullptr}, {"training", "seed"}, {"training", "precision"}};
  for (const std::string& key : resume_keys) keys.emplace_back("training", key.c_str());
  for (auto [section, key] : keys) {
    const bool precision = key && std::string_view(key) == "precision";
    const json::Value* s = field(saved, section, key);
    const json::Value* m = field(mine, section, key);
    if (precision && !s) s = &float32;
    if (precision && !m) m = &float32;
    const std::string name = key ? fmt::format("{}.{}", section, key) : section;
    if ((s != nullptr) != (m != nullptr) || (s && !(*s == *m)))
      throw std::runtime_error(
          fmt::format("{}: the checkpoint's '{}' ({}) differs from this run's ({})", path, name,
                      s ? json::dump(*s) : "missing", m ? json::dump(*m) : "missing"));
  }
  const json::Value stream = json::parse(checkpoint_metadata(file, path, "depthgrad.sampler"),
                                         path + " (depthgrad.sampler)");
  if (!(stream == trainer.sampler().description()))
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint's data stream {} differs from this run's {} (another dataset, "
        "sampler or seed)",
        path, json::dump(stream), json::dump(trainer.sampler().description())));
}
}  // namespace

void Trainer::load_checkpoint(const std::string& path) {
  // Check the config before touching anything: a checkpoint of another model or run is refused.
  SafetensorsFile file = load_safetensors(path);  // read once: checked here, applied below
  auto meta = [&](const char* key) -> const std::string& {
    return checkpoint_metadata(file, path, key);
  };
  check_checkpoint_matches(file, path, *this, resume_keys_);
  {  // the optimiser's parameter groups, when it was made from groups
    auto it = file.metadata.find("depthgrad.optimizer_groups");
    const json::Value saved = it == file.metadata.end()
                                  ? json::Value()
                                  : json::parse(it->second, path + " (depthgrad.optimizer_groups)");
    const json::Value mine = optimizer_groups_json();
    if (!(saved == mine))
      throw std::runtime_error(fmt::format(
          "{}: the checkpoint's optimizer parameter groups {} differ from this run's {}", path,
          saved.is_null() ? "(one group, made from the module)" : json::dump(saved),
          mine.is_null() ? "(one group, made from the module)" : json::dump(mine)));
  }
  // The trainer's own state is read and checked before anything changes, so a bad checkpoint
  // leaves the trainer as it was (load_training_checkpoint checks all of its part before copying).
  // A whole-string integer in [0, max].
  auto count = [&](const char* key, int64_t max) {
    const std::string& text = meta(key);
    int64_t value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > max)
      throw std::runtime_error(fmt::format(
          "{}: metadata '{}' is '{}', expected an integer in [0, {}]", path, key, text, max));
    return value;
  };
  // The counts must agree with each other and with this run: a step past the run's last, more
  // clipped or skipped steps than steps, an optimizer that took another number of steps, or loss
  // records of another length all mean a file that was not written by this trainer as it stands.
  const int64_t step = count("depthgrad.step", config_.steps);
  const int64_t clipped = count("depthgrad.clipped_steps", step);
  const int64_t skipped = count("depthgrad.skipped_steps", step);
  const int64_t taken = count("depthgrad.optimizer_step", step);
  if (taken != step - skipped)
    throw std::runtime_error(fmt::format(
        "{}: metadata 'depthgrad.optimizer_step' is {}, expected {} (step {} minus {} skipped)",
        path, taken, step - skipped, step, skipped));
  double wall = 0;
  {
    const std::string& text = meta("depthgrad.wall_seconds");
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), wall);
    if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(wall) ||
        wall < 0)
      throw std::runtime_error(fmt::format(
          "{}: metadata 'depthgrad.wall_seconds' is '{}', expected a finite number >= 0", path,
          text));
  }
  auto blob = [&](const char* key) -> const std::vector<uint8_t>& {
    const TensorEntry* e = file.find(std::string("state.") + key);
    if (!e) throw std::runtime_error(fmt::format("{}: tensor 'state.{}' is missing", path, key));
    if (e->dtype != "U8")
      throw std::runtime_error(fmt::format("{}: tensor 'state.{}' must be U8", path, key));
    return e->bytes;
  };
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("state.", 0) != 0) continue;
    const std::string key = e.name.substr(6);
    if (std::find(std::begin(kStateBlobs), std::end(kStateBlobs), key) == std::end(kStateBlobs))
      throw std::runtime_error(fmt::format(
          "{}: unexpected tensor '{}' (the trainer's state is state.sampler, state.generator, "
          "state.losses and state.grad_norms)",
          path, e.name));
  }
  Sampler sampler = sampler_;
  TorchGenerator generator = default_generator();
  try {
    sampler.set_state(blob("sampler"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.sampler': {}", path, e.what()));
  }
  try {
    generator.set_state(blob("generator"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(fmt::format("{}: tensor 'state.generator': {}", path, e.what()));
  }
  auto unpack = [&](const char* key) {
    const std::vector<uint8_t>& b = blob(key);
    if (b.size() % sizeof(double) != 0)
      throw std::runtime_error(fmt::format(
          "{}: 'state.{}' has {} bytes, not a whole number of doubles", path, key, b.size()));
    std::vector<double> v(b.size() / sizeof(double));
    if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());  // data() may be null when empty
    return v;
  };
  std::vector<double> losses = unpack("losses"), grad_norms = unpack("grad_norms");
  for (auto [key, values] : {std::pair<const char*, const std::vector<double>*>{"losses", &losses},
                             {"grad_norms", &grad_norms}})
    if (static_cast<int64_t>(values->size()) != step - skipped)
      throw std::runtime_error(
          fmt::format("{}: 'state.{}' holds {} values, expected {} (one per step taken)", path, key,
                      values->size(), step - skipped));

  const std::map<std::string, double> schedule_state = checkpoint_scheduler_state(file, path);
  if (!scheduler_ && !schedule_state.empty())
    throw std::runtime_error(fmt::format(
        "{}: the checkpoint holds a learning-rate schedule's state ('{}'), this run has no "
        "schedule",
        path, schedule_state.begin()->first));

  // The optimizer's state: read into tensors over the whole flat buffer (its own when unsharded;
  // with ZeRO-1 this rank then keeps its shard of them).
  OptimizerState optimizer = optimizer_state(*optimizer_);
  std::vector<Tensor> shards;
  if (sharded_)
    for (auto& [name, tensor] : optimizer.elements) {
      shards.push_back(tensor);
      tensor = Tensor::zeros({flat_.total}, tensor.dtype());
    }
  // The schedule's state first (it checks every value before it changes any); restored if the
  // model's or the optimiser's part is refused.
  const std::map<std::string, double> schedule_before =
      scheduler_ ? scheduler_->state() : std::map<std::string, double>{};
  if (scheduler_) {
    try {
      scheduler_->load_state(schedule_state);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
    }
  }
  try {
    load_training_checkpoint(file, path, *model_, optimizer);
  } catch (...) {
    if (scheduler_) scheduler_->load_state(schedule_before);
    throw;
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t lo = optimizer_->shard_begin(), count = shards[i].numel();
    std::memcpy(shards[i].mutable_data<float>(), optimizer.elements[i].second.data<float>() + lo,
                static_cast<size_t>(count) * sizeof(float));
  }
  optimizer_->set_scalar_state(optimizer.scalars);
  if (scheduler_) scheduler_->set_step(step);
  step_ = step;
  clipped_ = clipped;
  skipped_ = skipped;
  prior_wall_seconds_ = wall;
  started_ = std::chrono::steady_clock::now();
  sampler_ = sampler;
  default_generator() = generator;
  losses_ = std::move(losses);
  grad_norms_ = std::move(grad_norms);
}

}  // namespace dg
