// One trial of `depthgrad evolve`: a genome trained on one seed and evaluated on a split, the
// hook the search calls for it (TrialTrainer; tests pass a fake one), the real trainer, which
// trains and evaluates through train_and_evaluate like every other command, and the score of a
// trial over its seeds. It does not choose genomes or keep the search's records (search.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/attnres/evolve/genome.h"
#include "train/trainer.h"

namespace dg {

// ---- scoring ------------------------------------------------------------------------------------

// A child replaces its parent only when its score is lower by more than this (nats): smaller
// differences are floating-point noise (e.g. block and rd routes that start as the same function).
constexpr double kScoreTieTolerance = 1e-6;
struct TrialScore {
  double mean = 0;   // mean validation NLL over seeds
  double std = 0;    // sample std (0 for one seed)
  double sem = 0;    // standard error of the mean: std / √n
  double score = 0;  // mean + z·sem; lower is better
};
TrialScore score_trial(const std::vector<double>& nll, double z);

// ---- trials and the trainer hook ----------------------------------------------------------------

enum class EvalSplit { validation, test };

struct TrialRun {
  std::string trial_id;
  Genome genome;
  uint64_t seed = 0;
  size_t seed_index = 0, seed_count = 1;
  EvalSplit split = EvalSplit::validation;
};
struct SeedMetrics {
  uint64_t seed = 0;
  double nll = 0;           // mean NLL per token on the evaluation windows
  double perplexity = 0;    // exp(min(nll, 20))
  double initial_loss = 0;  // mean of the first ≤10 training losses
  double final_loss = 0;    // mean of the last ≤10 training losses
  int64_t parameters = 0;
  double seconds = 0;
  // For the report's charts (empty from a fake trainer): the training loss per step, and the mean
  // routing weights on the evaluation windows (layers × sources; empty for a model without routes).
  std::vector<double> losses;
  std::vector<std::vector<double>> routes_qk, routes_v;
  // When set, evaluates the trained weights (kept in memory) on the test split. The search keeps
  // these only for the baseline and the current champion. When empty (a fake trainer, or a trial
  // recorded by an earlier invocation of a resumed run), the test evaluation re-trains the trial
  // deterministically with split = test instead.
  std::function<double()> evaluate_test;
};
// Trains one genome on one seed and evaluates it on the requested split. Throws on failure (a
// non-finite training loss throws in dg::Trainer); the search records the error and goes on.
using TrialTrainer = std::function<SeedMetrics(const TrialRun& run)>;

// The real trainer: train_and_evaluate (train/lm/micro_lm_training.h) on the genome's run
// configuration (genome_run_config: the trial's seed, the corpus's vocabulary), evaluated on the
// first `eval_windows` non-overlapping windows of the split (0 = every window). Each result's
// evaluate_test holds the trained model (the search drops all but the baseline's and the
// champion's). The id vectors must outlive it.
TrialTrainer make_micro_lm_trainer(
    const std::vector<int32_t>& train, const std::vector<int32_t>& validation,
    const std::vector<int32_t>& test, int64_t vocab, int64_t eval_windows,
    std::function<void(const TrialRun&, const StepLog&)> on_step = {});

}  // namespace dg
