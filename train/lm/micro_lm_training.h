// The MicroLM as a client of the training loop (train/trainer.h): MicroLMTrainer builds the model
// a RunConfig describes, initialises it (training.init, training.seed), takes the run's token
// windows (the reference's random windows, or consecutive ones with training.sequential) and
// trains it with the generic Trainer, AdamW and the run's schedule. Beside it, one arm of the
// experiment the way the reference does it (tools/attnres/PROTOCOL.md §1.4–1.6, §3, §4): build,
// initialise, train, take route diagnostics, evaluate — one call per (config, seed). It does not
// tokenize, read files or write reports (the CLI does).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "train/dataset.h"
#include "train/lm/run_config.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace dg {

// A Trainer of a MicroLM. The token ids: an lvalue is read in place and must outlive the trainer;
// a moved vector or a shared_ptr is kept alive by it. Refuses (naming the size and what it needs)
// a model and batch that would not fit in memory, before anything is allocated.
class MicroLMTrainer : public Trainer {
 public:
  MicroLMTrainer(const RunConfig& run, const std::vector<int32_t>& train_ids,
                 Collectives* world = nullptr);
  MicroLMTrainer(const RunConfig& run, std::vector<int32_t>&& train_ids,
                 Collectives* world = nullptr);
  MicroLMTrainer(const RunConfig& run, std::shared_ptr<const std::vector<int32_t>> train_ids,
                 Collectives* world = nullptr);
  // A model the caller built and prepared before the Trainer takes its flat buffers (imported
  // weights loaded, adapters added: nn/lora.h); `model_extra` (a JSON object, or null) is stored
  // in checkpoints beside the model's config and must match on resume (the adapters' settings).
  MicroLMTrainer(const RunConfig& run, std::shared_ptr<MicroLM> model,
                 std::shared_ptr<const std::vector<int32_t>> train_ids, Collectives* world,
                 const json::Value& model_extra);
  MicroLM& model() { return model_; }
  const MicroLMConfig& model_config() const { return run_.model; }
  // The run this trainer was made from (model and training; data as the caller passed it).
  const RunConfig& run_config() const { return run_; }

 private:
  MicroLMTrainer(const RunConfig& run, std::shared_ptr<MicroLM> model,
                 std::shared_ptr<const std::vector<int32_t>> train_ids, Collectives* world);
  RunConfig run_;
  MicroLM& model_;
};

struct ArmResult {
  std::string name;
  MicroLMConfig config;
  int64_t parameters = 0;
  std::vector<double> losses;      // per step
  std::vector<double> grad_norms;  // per step, before clipping
  int64_t clipped_steps = 0;
  double initial_loss = 0;  // mean of the first min(10, n) step losses
  double final_loss = 0;    // mean of the last min(10, n)
  double lm_loss = 0;       // reference evaluation (§1.6)
  double perplexity = 0;    // exp(min(lm_loss, 20))
  double full_lm_loss = 0;  // every validation window (when eval_full)
  int64_t full_eval_tokens = 0;
  RouteStats train_routes;  // from the last training forward (the reference's JS)
  RouteStats eval_routes;   // over the evaluation windows after training
  double train_seconds = 0;
  double eval_seconds = 0;
  // With keep_trainer: the trainer holding the trained model, e.g. to evaluate it
  // later on another split (it refers to train_ids, which must outlive it).
  std::shared_ptr<MicroLMTrainer> trainer;
};

// Mean next-token loss over windows starting at `starts` (each seq_len long), in eval mode.
// Windows are evaluated in batches of up to `batch` windows; the mean over windows equals the
// mean over tokens because windows have equal length. Route stats of all windows go to `routes`.
double evaluate_windows(MicroLM& model, const std::vector<int32_t>& ids,
                        const std::vector<int64_t>& starts, int64_t seq_len,
                        RouteStats* routes = nullptr, int64_t batch = 32);

// Trains run.model with run.training on train_ids, then evaluates on validation_ids: run.data's
// eval_windows reference windows (0 = every window) and, with eval_full, every window as well.
// run.data's dataset and limits are the caller's business (the ids are already chosen). Every
// command trains through it: reproduce's arms, evolve's trials (evolve passes the test split as
// validation_ids for its final evaluation), bench.
// With a `checkpoint` path, training resumes from that training checkpoint when the file exists,
// and when on_step throws Interrupted (train/stop.h) the trainer is saved there before the
// exception goes on: an interrupted arm continues where it stopped, bit for bit. With
// checkpoint_every > 0 it is also saved there after every that many steps (not after the last),
// so that a process killed outright (SIGKILL, power loss) loses at most that many steps.
ArmResult train_and_evaluate(const std::string& name, const RunConfig& run,
                             const std::vector<int32_t>& train_ids,
                             const std::vector<int32_t>& validation_ids,
                             const std::function<void(const StepLog&)>& on_step = {},
                             bool keep_trainer = false, const std::string& checkpoint = "",
                             int64_t checkpoint_every = 0);

}  // namespace dg
