// The MicroLM on the training loop, and one arm of the experiment (see micro_lm_training.h).
#include "train/lm/micro_lm_training.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "autograd/tape.h"
#include "train/io/files.h"
#include "train/lm/batches.h"
#include "train/lm/memory_budget.h"
#include "train/stop.h"
#include "train/trainer.h"

namespace dg {

namespace {
// The model a RunConfig describes, initialised (training.init, training.seed). An absurd size is
// refused with what it needs before anything is allocated (a bad_alloc half-way through building
// the model says nothing useful).
std::shared_ptr<MicroLM> initialised_model(const RunConfig& run) {
  run.model.validate();
  check_memory_fits(
      estimate_memory(run.model, run.training.batch),
      fmt::format("training {} with batch {}", run.model.describe(), run.training.batch));
  auto model = std::make_shared<MicroLM>(run.model, DType::f32);
  if (run.training.init == InitScheme::parity)
    model->init_torch_parity(run.training.seed);
  else
    model->init_identical(run.training.seed);
  return model;
}

// The Trainer's parts for a MicroLM run: the model, its token windows, the sampler, the loss,
// AdamW over the model and the run's schedule. Order as the reference's §1.4: the model is
// initialised from the seed; the batch draws come from their own generator of the same seed.
TrainingSetup micro_lm_setup(const RunConfig& run, std::shared_ptr<MicroLM> model,
                             std::shared_ptr<const std::vector<int32_t>> ids, Collectives* world,
                             const json::Value& model_extra = {}) {
  if (!ids) throw std::invalid_argument("trainer: the token ids are a null shared_ptr");
  const int64_t T = run.model.seq_len;
  std::shared_ptr<TokenWindows> windows =
      run.training.sequential
          ? std::make_shared<TokenWindows>(ids, T, T)
          : std::make_shared<TokenWindows>(ids, T, 1, static_cast<int64_t>(ids->size()) - T - 1);
  Sampler sampler = run.training.sequential ? Sampler::sequential(windows->size())
                                            : Sampler::random(windows->size(), run.training.seed);
  auto optimizer = std::make_shared<AdamW>(*model, run.training.adamw);
  Schedule schedule = run.training.schedule;  // its rate and length are the run's
  schedule.lr = run.training.adamw.lr;
  schedule.total_steps = run.training.steps;
  auto scheduler = std::make_shared<ScheduleLR>(*optimizer, schedule);
  json::Value config = model_json(run.model);
  if (model_extra.is_object())
    for (const auto& [key, value] : model_extra.as_object()) config[key] = value;
  return TrainingSetup{
      .model = model,
      .data = std::move(windows),
      .sampler = std::move(sampler),
      .loss = typed_loss<MicroLM>(
          [](MicroLM& m, const Batch& b) { return m.loss(b[0], b[1]); }),  // inputs, targets
      .optimizer = std::move(optimizer),
      .scheduler = std::move(scheduler),
      .config = std::move(config),
      .world = world,
      // The whole training section, as the run config writes it; init and sequential act through
      // the model's initialisation and the windows, so a resume must keep them.
      .training_record = training_json(run.training),
      .resume_keys = {"sequential", "init"}};
}

// A shared_ptr that does not own: the ids are the caller's.
std::shared_ptr<const std::vector<int32_t>> borrowed(const std::vector<int32_t>& ids) {
  return std::shared_ptr<const std::vector<int32_t>>(std::shared_ptr<const std::vector<int32_t>>(),
                                                     &ids);
}
}  // namespace

MicroLMTrainer::MicroLMTrainer(const RunConfig& run, std::shared_ptr<MicroLM> model,
                               std::shared_ptr<const std::vector<int32_t>> train_ids,
                               Collectives* world)
    : Trainer(micro_lm_setup(run, model, std::move(train_ids), world), run.training),
      run_(run),
      model_(*model) {}

MicroLMTrainer::MicroLMTrainer(const RunConfig& run, std::shared_ptr<MicroLM> model,
                               std::shared_ptr<const std::vector<int32_t>> train_ids,
                               Collectives* world, const json::Value& model_extra)
    : Trainer(micro_lm_setup(run, model, std::move(train_ids), world, model_extra), run.training),
      run_(run),
      model_(*model) {}

MicroLMTrainer::MicroLMTrainer(const RunConfig& run,
                               std::shared_ptr<const std::vector<int32_t>> train_ids,
                               Collectives* world)
    : MicroLMTrainer(run, initialised_model(run), std::move(train_ids), world) {}

MicroLMTrainer::MicroLMTrainer(const RunConfig& run, const std::vector<int32_t>& train_ids,
                               Collectives* world)
    : MicroLMTrainer(run, borrowed(train_ids), world) {}

MicroLMTrainer::MicroLMTrainer(const RunConfig& run, std::vector<int32_t>&& train_ids,
                               Collectives* world)
    : MicroLMTrainer(run, std::make_shared<const std::vector<int32_t>>(std::move(train_ids)),
                     world) {}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Merges per-batch route stats into one (token-weighted means).
void merge_routes(RouteStats& total, const RouteStats& part, int64_t& tokens_so_far,
                  int64_t part_tokens) {
  if (total.js_per_layer.empty()) {
    total = part;
    tokens_so_far = part_tokens;
    return;
  }
  const double w_old = static_cast<double>(tokens_so_far), w_new = static_cast<double>(part_tokens);
  auto blend = [&](double a, double b) { return (a * w_old + b * w_new) / (w_old + w_new); };
  for (size_t l = 0; l < total.js_per_layer.size(); ++l) {
    total.js_per_layer[l] = blend(total.js_per_layer[l], part.js_per_layer[l]);
    for (size_t j = 0; j < total.mean_alpha_qk[l].size(); ++j) {
      total.mean_alpha_qk[l][j] = blend(total.mean_alpha_qk[l][j], part.mean_alpha_qk[l][j]);
      total.mean_alpha_v[l][j] = blend(total.mean_alpha_v[l][j], part.mean_alpha_v[l][j]);
    }
    total.js_per_token[l].insert(total.js_per_token[l].end(), part.js_per_token[l].begin(),
                                 part.js_per_token[l].end());
  }
  total.js_reference = blend(total.js_reference, part.js_reference);
  tokens_so_far += part_tokens;
}
}  // namespace

double evaluate_windows(MicroLM& model, const std::vector<int32_t>& ids,
                        const std::vector<int64_t>& starts, int64_t seq_len, RouteStats* routes,
                        int64_t batch) {
  if (starts.empty())
    throw std::invalid_argument("evaluation: no windows (the split is shorter than one window)");
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double loss_sum = 0;
  int64_t tokens = 0;
  LmBatch b;
  RouteStats merged;
  int64_t route_tokens = 0;  // tokens merged into `merged` so far (its own count: see merge_routes)
  for (size_t first = 0; first < starts.size(); first += batch) {
    std::vector<int64_t> chunk(starts.begin() + first,
                               starts.begin() + std::min(starts.size(), first + batch));
    make_lm_batch(ids, chunk, seq_len, b);
    double mean = model.loss(b.inputs, b.targets).item();
    const int64_t n = static_cast<int64_t>(chunk.size()) * seq_len;
    loss_sum += mean * static_cast<double>(n);
    if (routes) merge_routes(merged, model.route_stats(), route_tokens, n);
    tokens += n;
  }
  if (routes) *routes = merged;
  model.train(was_training);
  return loss_sum / static_cast<double>(tokens);
}

ArmResult train_and_evaluate(const std::string& name, const RunConfig& run,
                             const std::vector<int32_t>& train_ids,
                             const std::vector<int32_t>& validation_ids,
                             const std::function<void(const StepLog&)>& on_step, bool keep_trainer,
                             const std::string& checkpoint, int64_t checkpoint_every) {
  MatmulPrecisionScope precision(run.training.precision);  // training and evaluation
  ArmResult r;
  r.name = name;
  r.config = run.model;
  const MicroLMConfig& config = run.model;
  auto trainer = std::make_shared<MicroLMTrainer>(run, train_ids);
  MicroLM& model = trainer->model();
  r.parameters = model.parameter_count();
  if (!checkpoint.empty() && file_exists(checkpoint)) trainer->load_checkpoint(checkpoint);
  // Every checkpoint_every steps (not after the last: the finished arm needs none).
  const bool periodic = !checkpoint.empty() && checkpoint_every > 0;
  // The step's log line goes out before its checkpoint: a kill between the two then resumes from
  // the older checkpoint and drops the lines past it, instead of leaving this step unlogged.
  const std::function<void(const StepLog&)> step_and_save = [&](const StepLog& log) {
    if (on_step) on_step(log);
    if ((log.step + 1) % checkpoint_every == 0 && log.step + 1 < log.steps)
      trainer->save_checkpoint(checkpoint);
  };
  try {
    trainer->run(run.training.steps, periodic ? step_and_save : on_step);
  } catch (const Interrupted&) {
    if (!checkpoint.empty()) trainer->save_checkpoint(checkpoint);
    throw;
  }
  r.losses = trainer->losses();
  r.grad_norms = trainer->grad_norms();
  r.clipped_steps = trainer->clipped_steps();
  // The whole arm's training time, including the invocations before a resume (from the checkpoint).
  r.train_seconds = trainer->wall_seconds();
  // §4: the reference's JS comes from the last training forward (before its optimizer step).
  r.train_routes = model.route_stats();
  const int64_t n = static_cast<int64_t>(r.losses.size());
  const int64_t k = std::min<int64_t>(10, n);
  if (n > 0) {
    r.initial_loss =
        std::accumulate(r.losses.begin(), r.losses.begin() + k, 0.0) / static_cast<double>(k);
    r.final_loss =
        std::accumulate(r.losses.end() - k, r.losses.end(), 0.0) / static_cast<double>(k);
  }
  const auto eval_start = Clock::now();
  std::vector<int64_t> starts = eval_window_starts(static_cast<int64_t>(validation_ids.size()),
                                                   config.seq_len, run.data.eval_windows);
  r.lm_loss = evaluate_windows(model, validation_ids, starts, config.seq_len, &r.eval_routes);
  r.perplexity = std::exp(std::min(r.lm_loss, 20.0));
  if (run.data.eval_full) {
    std::vector<int64_t> all =
        full_eval_starts(static_cast<int64_t>(validation_ids.size()), config.seq_len);
    r.full_lm_loss = evaluate_windows(model, validation_ids, all, config.seq_len, &r.eval_routes);
    r.full_eval_tokens = static_cast<int64_t>(all.size()) * config.seq_len;
  }
  r.eval_seconds = seconds_since(eval_start);
  if (keep_trainer) r.trainer = trainer;
  return r;
}

}  // namespace dg
