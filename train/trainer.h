// Trainer: the training loop of any Module with any optimiser, as an object that can stop and
// resume exactly. The caller gives the model (built and initialised), a loss typed to the model (a
// function of the model and a batch), the data (a Dataset and a Sampler, train/dataset.h), the
// loop's settings (TrainingConfig, train/training_config.h), an optimiser over the model's flat
// buffers (a FlatOptimizer: SGD, Adam, AdamW, RMSprop, Adagrad or the user's own, train/optim.h)
// (or one made from tensors or parameter groups of the model: the Trainer moves it onto the flat
// buffers, FlatOptimizer::use_flat_buffer) and optionally a learning-rate schedule (an
// LrScheduler over that optimiser). Each step runs in one order of named steps (train_step):
// draw the step's examples; forward-backward per micro-batch (zero the gradients, forward and
// loss, backward, add up); reduce over the micro-batches and ranks; check for a non-finite loss or
// gradient and clip; update; schedule. A StepObserver (below) sees the step at named points.
//
// What it guarantees, for every model and optimiser (tests/test_trainer.cpp,
// tests/test_loop_models.cpp):
//  - Resume: a checkpoint holds the weights by parameter name, the optimiser's state (its
//    per-element tensors and scalars, under its name), the step, the sampler's position and RNG,
//    the default generator (dropout's draws), the loss record and the wall time, so a resumed run
//    gives bit-identical losses and weights to an uninterrupted one. The schedule's position is
//    the step's; a schedule with state of its own (ReduceLROnPlateau: best, counters, rates) has
//    it saved and restored. The caller's JSON config is stored as metadata and must match on
//    resume; a checkpoint of another optimiser is refused.
//  - Accumulation and ranks: with accum > 1 or over several processes (train/data_parallel.h) a
//    step runs the micro-batches of one global batch and gives the same bits however they are
//    spread over the processes; ZeRO-1 (zero = 1) shards the optimiser's state, ZeRO-2 (zero = 2)
//    the summed gradient as well, and the sum over ranks runs bucket by bucket while backward
//    goes on (overlap, train/gradient_reducer.h): none of them changes a bit.
//    One process with accum 1 is the same path with one micro-batch.
//  - Divergence: a non-finite loss or gradient stops the run before the optimizer step, naming
//    the step and the first non-finite tensor (or skips the step when asked).
// The loss must be a mean over the batch's examples (so that micro-batch means average to the
// global batch's mean). Of TrainingConfig the loop reads steps, batch, accum, clip, zero,
// overlap, precision and detect_anomaly; seed is recorded and checked on resume but acts through
// the caller (the sampler carries its own seed). It does not read files, build models, choose an
// optimiser or print: the caller does.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/module.h"
#include "train/checkpoint.h"
#include "train/data/prefetch.h"
#include "train/data_parallel.h"
#include "train/dataset.h"
#include "train/gradient_reducer.h"
#include "train/io/json.h"
#include "train/optim.h"
#include "train/training_config.h"

namespace dg {

// The loss of one (micro-)batch: a scalar tensor, the mean over the batch's examples. The loop
// holds it over Module&; typed_loss (below) makes one from a function of the model's own type.
using LossFunction = std::function<Tensor(Module& model, const Batch& batch)>;
// A loss of the model's own type M, as the Trainer holds it. The model the Trainer passes is the
// one it was given, so the conversion back to M is exact.
template <class M>
LossFunction typed_loss(std::function<Tensor(M&, const Batch&)> loss) {
  static_assert(std::is_base_of_v<Module, M>, "the model must be a dg::Module");
  if (!loss) return {};
  return [loss = std::move(loss)](Module& model, const Batch& batch) {
    return loss(static_cast<M&>(model), batch);
  };
}

struct StepLog {
  int64_t step = 0;   // 0-based
  int64_t steps = 0;  // total
  double loss = 0;
  double grad_norm = 0;  // before clipping
  bool clipped = false;
  double lr = 0;
  double seconds = 0;            // wall time of this step
  double tokens_per_second = 0;  // examples/s × the dataset's tokens per example
  bool skipped = false;          // a non-finite loss or gradient: no optimizer step (skip mode)
  // Over ranks: seconds of this step spent on communication (the gradient's sum over the ranks,
  // while backward ran and after it, and the gathers); 0 in one process.
  double communication_seconds = 0;
  // Of it, the wait after backward until this rank's shard of the gradient's sum was there: the
  // whole reduce-scatter without overlap, what was left of the chains with it.
  double reduction_wait_seconds = 0;
  int64_t skipped_steps = 0;  // steps skipped so far in the run
};

// Thrown when a step's loss or gradient is not finite and skipping is off: the run diverged at
// `step` (0-based). The message names the step, the loss and the first non-finite tensor; the
// model is left as before the step.
struct TrainingDiverged : std::runtime_error {
  TrainingDiverged(int64_t step, double loss, const std::string& problem);
  int64_t step;
  double loss;
};

class Trainer;

// Callbacks at named points of Trainer::train_step, for tests and instrumentation (set with
// Trainer::set_observer; not owned). Each default does nothing; a callback that changes nothing
// changes no bit of the run.
struct StepObserver {
  virtual ~StepObserver() = default;
  // After draw: `examples` are the step's global batch, in micro-batch order.
  virtual void after_draw(const Trainer& /*trainer*/, std::span<const int64_t> /*examples*/) {}
  // After reduce, before the scaling to the mean: `gradients` (the flat gradient buffer) holds the
  // step's gradient summed over the micro-batches and the ranks (over ranks, this rank's shard
  // holds the sum). Not called when a loss in one process stopped the step early. It may write
  // into them: the divergence tests make a spike there (a NaN, as an overflow would).
  virtual void after_reduce(const Trainer& /*trainer*/, Tensor& /*gradients*/) {}
  // After the step, taken or skipped (trainer.step() counts it); not when it throws.
  virtual void after_step(const Trainer& /*trainer*/, const StepLog& /*log*/) {}
};

// What a Trainer is made of besides its settings. The model, the dataset, the optimiser and the
// schedule must outlive the Trainer or be handed over as shared_ptrs. The optimiser must be over
// the model's flat buffers (module.flat_parameters()) or over parameter groups of the model's
// parameters (ParamGroup, weight_decay_groups: moved onto the flat buffers, each group keeping
// its rate and weight decay, and its groups recorded in checkpoints and checked on resume),
// fresh (no step taken), and the schedule,
// when given, over that optimiser. `config` is the caller's description of the model (any JSON),
// stored in checkpoints as "depthgrad.config"'s "model" and compared on resume. Frozen parameters
// (requires_grad false when the Trainer is made: a LoRA model's base, nn/lora.h) are outside the
// flat buffers, so they get no gradient or optimiser state and are never clipped, reduced over
// ranks, updated or saved in checkpoints: to resume, rebuild the model as it was (base, then
// lora::apply) and load the checkpoint (train/checkpoint.h).
struct TrainingSetup {
  std::shared_ptr<Module> model;
  std::shared_ptr<const Dataset> data;
  Sampler sampler;
  LossFunction loss;
  std::shared_ptr<FlatOptimizer> optimizer;
  std::shared_ptr<LrScheduler> scheduler = nullptr;  // null: the optimiser's rate throughout
  json::Value config = {};
  Collectives* world = nullptr;  // not owned; null = one process
  // The "training" section the checkpoints record, when the caller's settings are more than the
  // loop's (an application's run config: its optimiser, schedule, how its model starts); null =
  // the loop's own (training_config_json). It must hold the loop's keys with the loop's values.
  json::Value training_record = {};
  // Keys of that section that must match on resume besides seed and precision (settings that act
  // through the caller, such as how the model was initialised or the data was cut).
  std::vector<std::string> resume_keys = {};
  // Threads filling the next steps' micro-batches while this one runs (as DataLoader's
  // num_workers; train/data/prefetch.h), and micro-batches queued per worker. 0: each
  // micro-batch is filled when its turn comes. No bit depends on it, so it is not recorded in
  // checkpoints: a run may resume with another count.
  int64_t loader_workers = 0;
  int64_t prefetch_factor = 2;
};

class Trainer {
 public:
  // The model, data, optimiser and schedule by reference: all must outlive the Trainer. The loss
  // takes the model as its own type M: no cast in the caller.
  template <class M>
  Trainer(M& model, const Dataset& data, Sampler sampler,
          std::type_identity_t<std::function<Tensor(M&, const Batch&)>> loss,
          const TrainingConfig& config, FlatOptimizer& optimizer, LrScheduler* scheduler = nullptr,
          json::Value model_config = {}, Collectives* world = nullptr)
      : Trainer(TrainingSetup{.model = borrow<Module>(model),
                              .data = borrow<const Dataset>(data),
                              .sampler = std::move(sampler),
                              .loss = typed_loss<M>(std::move(loss)),
                              .optimizer = borrow<FlatOptimizer>(optimizer),
                              .scheduler = scheduler ? borrow<LrScheduler>(*scheduler) : nullptr,
                              .config = std::move(model_config),
                              .world = world},
                config) {}
  // From a DataLoader made with DataLoaderOptions (torch's order, epochs): its dataset and its
  // order (the loader's sampler, copied at its current position: the Trainer keeps its own). Each
  // step takes the loader's next batch, so steps = epochs × loader.size() runs whole epochs;
  // ranks × accum × batch must equal its batch_size, and an epoch's short last batch (drop_last
  // false) is one step's batch, so it needs one micro-batch per step (accum 1, one process)
  // unless batch_size divides the dataset. A checkpoint keeps the position within the epoch.
  template <class M>
  Trainer(M& model, const DataLoader& loader,
          std::type_identity_t<std::function<Tensor(M&, const Batch&)>> loss,
          const TrainingConfig& config, FlatOptimizer& optimizer, LrScheduler* scheduler = nullptr,
          json::Value model_config = {}, Collectives* world = nullptr)
      : Trainer(model, loader.dataset(), loader.sampler(), std::move(loss), config, optimizer,
                scheduler, std::move(model_config), world) {
    check_loader_batch(loader.batch_size());
    set_loader_workers(loader.num_workers(), loader.prefetch_factor());
  }
  Trainer(TrainingSetup setup, const TrainingConfig& config);

  // Runs steps until `step()` == until (or config.steps). Calls on_step after each.
  void run(int64_t until, const std::function<void(const StepLog&)>& on_step = {});
  void run() { run(config_.steps); }
  // One step; returns its log. Throws TrainingDiverged (see set_skip_nonfinite).
  StepLog train_step();
  // TrainingSetup's loader_workers and prefetch_factor, changed between steps (0: none).
  void set_loader_workers(int64_t workers, int64_t prefetch_factor = 2);
  int64_t loader_workers() const { return loader_workers_; }
  const BatchPrefetcher* prefetcher() const { return prefetcher_.get(); }  // null without workers
  int64_t step() const { return step_; }
  Module& model() { return *model_; }
  const Dataset& dataset() const { return *data_; }
  const Sampler& sampler() const { return sampler_; }
  FlatParameters& parameters() { return flat_; }
  FlatOptimizer& optimizer() { return *optimizer_; }
  LrScheduler* scheduler() { return scheduler_.get(); }
  const TrainingConfig& config() const { return config_; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<double>& grad_norms() const { return grad_norms_; }
  int64_t clipped_steps() const { return clipped_; }
  // Examples per optimizer step over all ranks: ranks × accum × batch.
  int64_t global_batch() const;
  int ranks() const { return world_ ? world_->size() : 1; }
  int rank() const { return world_ ? world_->rank() : 0; }  // this process's, 0 in one process
  // Called at the named points of every step (StepObserver); null (the default) for none. Not
  // owned: it must outlive the steps it observes.
  void set_observer(StepObserver* observer) { observer_ = observer; }

  // Off (the default): a non-finite loss or gradient throws TrainingDiverged. On: that step is
  // skipped (no optimizer step; the batch is used up) and counted; training goes on. Like
  // llm.c's outlier skipping, a run option rather than part of what a run computes.
  void set_skip_nonfinite(bool skip) { skip_nonfinite_ = skip; }
  // Over ranks with overlap: the size of the gradient's buckets in float32 elements (torch DDP's
  // bucket_cap_mb, in elements); 2^18 (1 MiB) by default. Changes no bit.
  void set_bucket_elements(int64_t elements);
  int64_t skipped_steps() const { return skipped_; }
  // Wall-clock seconds of the whole run: those of the invocations before a resume (stored in the
  // checkpoint) plus this one's since the Trainer was made.
  double wall_seconds() const;

  // {"model": the caller's config, "training": the settings}: the checkpoint's metadata.
  json::Value config_json() const;
  // With ranks: called by every rank; rank 0 writes the one file (atomically), and every rank
  // returns once it is complete. `metadata` is added to the file's (keys must not start with
  // "depthgrad.").
  void save_checkpoint(const std::string& path,
                       const std::map<std::string, std::string>& metadata = {}) const;
  // Restores a checkpoint written by save_checkpoint for the same model config, optimiser, seed
  // and data stream (checked before anything changes). The global batch must be the
  // checkpoint's; how it is split (ranks × accum × batch) may differ.
  void load_checkpoint(const std::string& path);

 private:
  // Construction, in order (trainer.cpp).
  void check_settings();
  void check_training_record() const;
  void check_trainable_parameters() const;
  void attach_optimizer();
  void check_short_last_batch() const;
  void prepare_micro_batches_and_ranks();
  void check_loader_batch(int64_t batch_size) const;
  // The named steps of train_step, in order (trainer.cpp).
  void draw();
  bool forward_backward();  // false: a non-finite loss stopped the step early (one process)
  bool forward_backward_micro_batch(int64_t k);
  void add_to_gradient_sum(int64_t k);
  void reduce(bool stopped_early);
  double step_loss();
  std::string check_and_clip(double loss, ClipResult& clip);  // "" when all is finite
  ClipResult clip_gradients();
  void update();
  void schedule();
  // Resume, after every check (trainer_checkpoint.cpp): the schedule's state, the weights and the
  // optimiser's state from `file`.
  void load_weights_and_optimizer(const SafetensorsFile& file, const std::string& path,
                                  const std::map<std::string, double>& schedule_state);
  // The checkpoint's optimiser groups must be this run's.
  void check_optimizer_groups(const SafetensorsFile& file, const std::string& path) const;
  template <class T>
  static std::shared_ptr<T> borrow(T& object) {  // a shared_ptr that does not own
    return std::shared_ptr<T>(std::shared_ptr<T>(), &object);
  }
  std::shared_ptr<Module> model_;
  std::shared_ptr<const Dataset> data_;
  Sampler sampler_;
  LossFunction loss_;
  json::Value model_config_, training_record_;
  std::vector<std::string> resume_keys_;
  TrainingConfig config_;
  FlatParameters flat_;
  std::shared_ptr<FlatOptimizer> optimizer_;
  std::shared_ptr<LrScheduler> scheduler_;
  Batch batch_;
  std::vector<int64_t> step_indices_;  // the step's global batch of examples
  // Micro-batch `micro` (over all ranks) of a step's global batch `all`.
  std::span<const int64_t> micro_batch(std::span<const int64_t> all, int64_t micro) const;
  // This rank's micro-batch k of the step into batch_: from the workers' queue when there is one.
  void fill_micro_batch(int64_t k);
  // Queues this rank's micro-batches of the steps after the current one (from k + 1 of it when
  // `from_current` is k, after a missed prediction), drawn from ahead_, up to the queue's depth.
  void prefetch(int64_t from_current);
  int64_t loader_workers_ = 0, prefetch_factor_ = 2;
  std::unique_ptr<BatchPrefetcher> prefetcher_;
  std::optional<Sampler> ahead_;  // where the last queued step's draw left the sampler's copy
  int64_t step_ = 0;
  std::vector<double> losses_, grad_norms_;
  int64_t clipped_ = 0;

  // Accumulation and data parallelism: more than one micro-batch per step, here or over ranks.
  bool accumulates() const { return config_.accum > 1 || ranks() > 1; }
  // The first slot of `buffer` (the values or the gradients) that is not all finite, within
  // this rank's shard when `sharded`, agreed over the ranks; "" when every one is.
  std::string first_nonfinite(const Tensor& buffer, bool sharded) const;
  // A step whose loss or gradient is not finite (`problem` says which): throws TrainingDiverged,
  // or with skipping on counts it and returns its log.
  StepLog nonfinite_step(double loss, const std::string& problem,
                         std::chrono::steady_clock::time_point start);
  StepLog finished_step(double loss, const ClipResult& clip, double lr,
                        std::chrono::steady_clock::time_point start);
  // The optimiser's state over the whole flat buffer: its own tensors, or with ZeRO-1 every
  // rank's shard gathered on rank 0 (elsewhere the tensors are left undefined). Collective.
  OptimizerState full_optimizer_state() const;
  json::Value optimizer_groups_json() const;
  Collectives* world_ = nullptr;
  bool sharded_ = false;  // optimiser state sharded: config.zero >= 1 on more than one rank
  // The reduction that overlaps backward (ranks > 1, overlap on), and the post-accumulate hooks
  // on the parameters that feed it (removed with the trainer).
  std::unique_ptr<GradientReducer> reducer_;
  struct RemovedHooks {
    std::vector<HookHandle> handles;
    RemovedHooks() = default;
    RemovedHooks(RemovedHooks&&) = default;
    RemovedHooks& operator=(RemovedHooks&&) = default;
    ~RemovedHooks() {
      for (HookHandle& h : handles) h.remove();
    }
  } reducer_hooks_;
  double communication_seconds_ = 0, reduction_wait_seconds_ = 0;  // of the running step
  void zero_gradients();
  void reduce_over_ranks();
  // The reducer's bucket size: 2^18 float32 elements (1 MiB), small enough that the buckets of a
  // small model still overlap its backward, large enough that a message's latency is amortised.
  static constexpr int64_t kGradientBucketElements = int64_t{1} << 18;
  void make_reducer(int64_t bucket_elements);
  std::vector<int64_t> shard_bounds_;
  GradientNormBlocks norm_blocks_;
  std::vector<double> micro_losses_;
  Tensor gradient_sum_;  // [total] Σ of this rank's micro-batch gradients (accum > 1)

  bool skip_nonfinite_ = false;
  StepObserver* observer_ = nullptr;
  int64_t skipped_ = 0;            // losses_ and grad_norms_ hold the steps that were not skipped
  double prior_wall_seconds_ = 0;  // invocations before the last resume
  // when this process started the run: construction, or the last load_checkpoint
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// The mean of `loss` over every example of `data` (batches of up to `batch`, in order, weighted
// by their sizes), in eval mode and without a graph; the model's train/eval mode is restored.
double evaluate_loss(Module& model, const Dataset& data, const LossFunction& loss,
                     int64_t batch = 32);
// The same with a loss of the model's own type.
template <class M>
double evaluate_loss(M& model, const Dataset& data,
                     std::type_identity_t<std::function<Tensor(M&, const Batch&)>> loss,
                     int64_t batch = 32) {
  return evaluate_loss(static_cast<Module&>(model), data, typed_loss<M>(std::move(loss)), batch);
}

}  // namespace dg
