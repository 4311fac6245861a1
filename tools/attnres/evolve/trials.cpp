// A trial's score over seeds and the real trainer, which trains and evaluates a genome through
// train_and_evaluate like `depthgrad reproduce` does (see trials.h).
#include "tools/attnres/evolve/trials.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "tools/attnres/stats.h"
#include "train/lm/batches.h"
#include "train/lm/micro_lm_training.h"

namespace dg {

TrialScore score_trial(const std::vector<double>& nll, double z) {
  TrialScore s;
  if (nll.empty()) throw std::invalid_argument("score_trial: no seeds");
  s.mean = mean_of(nll);
  s.std = sample_std(nll);
  s.sem = nll.size() > 1 ? s.std / std::sqrt(static_cast<double>(nll.size())) : 0.0;
  s.score = s.mean + z * s.sem;
  return s;
}

TrialTrainer make_micro_lm_trainer(const std::vector<int32_t>& train,
                                   const std::vector<int32_t>& validation,
                                   const std::vector<int32_t>& test, int64_t vocab,
                                   int64_t eval_windows,
                                   std::function<void(const TrialRun&, const StepLog&)> on_step) {
  return [&train, &validation, &test, vocab, eval_windows, on_step](const TrialRun& run) {
    const auto start = std::chrono::steady_clock::now();
    const RunConfig config = genome_run_config(run.genome, run.seed, vocab, eval_windows);
    std::function<void(const StepLog&)> progress;
    if (on_step) progress = [&on_step, &run](const StepLog& log) { on_step(run, log); };
    const std::vector<int32_t>& split = run.split == EvalSplit::test ? test : validation;
    const ArmResult arm = train_and_evaluate(run.trial_id, config, train, split, progress,
                                             /*keep_trainer=*/true);
    if (!std::isfinite(arm.lm_loss))
      throw std::runtime_error(fmt::format("{}: evaluation NLL is {}", run.trial_id, arm.lm_loss));
    SeedMetrics m;
    m.seed = run.seed;
    m.nll = arm.lm_loss;
    m.perplexity = arm.perplexity;
    m.initial_loss = arm.initial_loss;
    m.final_loss = arm.final_loss;
    m.parameters = arm.parameters;
    m.losses = arm.losses;
    m.routes_qk = arm.eval_routes.mean_alpha_qk;
    m.routes_v = arm.eval_routes.mean_alpha_v;
    if (run.split == EvalSplit::validation) {
      // The trained model stays in memory for the test split (same windows as validation).
      m.evaluate_test = [trainer = arm.trainer, &test, eval_windows, id = run.trial_id] {
        const int64_t seq_len = trainer->model_config().seq_len;
        const double nll = evaluate_windows(
            trainer->model(), test,
            eval_window_starts(static_cast<int64_t>(test.size()), seq_len, eval_windows), seq_len);
        if (!std::isfinite(nll))
          throw std::runtime_error(fmt::format("{}: evaluation NLL is {}", id, nll));
        return nll;
      };
    }
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return m;
  };
}

}  // namespace dg
