// The search of `depthgrad evolve`: generation 0 trains the baseline; each later generation
// proposes children of the current champion (proposals.h), trains each on the same seeds through
// the TrialTrainer (trials.h) and keeps the best by score = mean validation NLL + z·stderr; ties
// keep the parent. The test split is evaluated once at the end, for the baseline and the champion.
// Writes result.json, report.md and index.html (render.h) after every trial; resumes from a
// result.json. It does not parse flags or load data: the CLI hands it a TrialTrainer.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tools/attnres/evolve/ablation.h"
#include "tools/attnres/evolve/directions.h"
#include "tools/attnres/evolve/genome.h"
#include "tools/attnres/evolve/proposals.h"
#include "tools/attnres/evolve/records.h"
#include "tools/attnres/evolve/trials.h"
#include "train/io/json.h"

namespace dg {

// The search's own settings. dataset, eval_windows, seed and vocab are not a RunConfig's data and
// training sections: they hold for the whole search (each trial's seeds follow `seed`, its run is
// built by genome_run_config), so they stay here; the CLI declares --eval-windows and the
// baseline's flags from the run config's settings table (tools/cli/run_config_flags.h).
struct EvolveOptions {
  std::string model = "micro-llm";
  std::string dataset = "wikitext-2";
  std::string direction = "比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由";
  int64_t generations = 2;
  int64_t population = 4;
  int64_t trial_seeds = 2;  // every trial trains on seeds seed, seed+1, …
  int64_t eval_windows = 64;
  uint64_t seed = 42;  // training seeds and the proposal RNG
  double confidence_z = 1.0;
  // single (default): a mutation changes one gene, so every mutation's gain is attributable;
  // multi: one or two genes (the crossover slot may change several either way).
  std::string mutation = "single";
  Genome baseline;
  int64_t vocab = 512;
  int threads = 1;
  std::string run_dir;  // where files go (required when write_files)
  bool write_files = true;
  json::Value dataset_info;  // recorded as given (token counts, sha256s)
  std::function<void(const std::string& line)> on_message;
  // Called before each trial: (trial id, trials finished so far, trials planned in total).
  std::function<void(const std::string& trial_id, int64_t done, int64_t planned)> on_trial;
};

struct EvolveOutput {
  json::Value result;
  std::string summary;  // the lines the CLI prints at the end
};

// After the search, when the champion differs from its parent in more than one gene (a two-gene
// mutation or a crossover), each changed gene is applied alone to the parent and trained on the
// same seeds (evolve/ablation.h); result.json["ablation"] says whether the gain is attributed to
// one gene or confounded.
// Runs (or, with `resume` = a previous result.json, continues) the search. Resuming replays the
// search with the recorded trials in place of training them: the same proposals come back (they
// depend only on the seed and the recorded results), so the run continues after the last
// finished trial. Writes result.json, report.md and index.html after every trial when write_files.
EvolveOutput run_evolution(const EvolveOptions& options, const TrialTrainer& trainer,
                           const json::Value* resume = nullptr);

// The search settings recorded in result.json["config"], and back (for --resume).
json::Value evolve_config_json(const EvolveOptions& options);
EvolveOptions evolve_options_from_config(const json::Value& config);

// One run of the search, from its settings to result.json: the state run_evolution keeps while
// it trains trials. run() takes these steps, top-down:
//   1. the baseline (g0-t0); a failed baseline ends the search;
//   2. each generation: proposals of the champion (and the runner-up) trained on the trial seeds
//      (run_generation), then selection (select_champion: a strictly lower score, beyond
//      kScoreTieTolerance, replaces the parent; ties keep it);
//   3. the ablation of the champion's changes when it changed more than one gene (run_ablation);
//   4. the test split, once, for the baseline and the champion (run_tests).
// After every trial it writes result.json, report.md and index.html (write). A resumed search
// (`resume` = a previous result.json) proposes the same trials again and takes the recorded ones
// in place of training them (load_resume, train_trial). The result document (build) and the
// closing summary are in search_result.cpp.
class EvolveSearch {
 public:
  // Checks the options (std::invalid_argument naming the flag) and, with `resume`, that the
  // recorded run has the same settings.
  EvolveSearch(const EvolveOptions& options, const TrialTrainer& trainer,
               const json::Value* resume);
  EvolveOutput run();

 private:
  // ---- the loop (search.cpp)
  void check_options() const;
  void say(const std::string& line) const;
  void say_direction() const;
  void load_resume(const json::Value& result);
  void load_resumed_tests(const json::Value& result);
  void run_baseline();
  // The proposals of generation g from the champion, each trained and recorded.
  void run_generation(int64_t generation, size_t champion);
  size_t select_champion(int64_t generation, size_t champion);
  void run_trial(TrialRecord trial);
  TrialRecord train_trial(TrialRecord trial);
  void run_ablation(size_t champion);
  TrialRecord ablation_trial(const AblationVariant& variant, const TrialRecord& champion,
                             const TrialRecord& parent, int64_t variants);
  void run_tests(size_t champion);
  TestRecord run_test(const std::string& role, const TrialRecord& trial);
  const TrialRecord* find_trial(const std::string& id) const;
  const TrialRecord* find_genome(const Genome& genome) const;
  int64_t planned_trials() const;
  int64_t runner_up(size_t champion) const;
  size_t current_champion() const;
  std::vector<std::string> lineage(size_t champion) const;

  // ---- result.json and the summary (search_result.cpp)
  json::Value build(const std::string& status) const;
  json::Value protocol_json() const;
  json::Value champion_json(const std::string& status) const;
  json::Value tests_json() const;
  json::Value ablation_json() const;
  json::Value runtime_json() const;
  void write(const std::string& status) const;
  std::string summary(const json::Value& result) const;

  const EvolveOptions& o_;
  const TrialTrainer& trainer_;
  std::chrono::steady_clock::time_point started_;
  std::vector<uint64_t> seeds_;
  DirectionPlan plan_;
  std::string run_id_;
  std::vector<std::string> seen_;  // genome keys proposed so far
  std::vector<TrialRecord> trials_;
  std::vector<RoundRecord> rounds_;
  std::vector<TestRecord> tests_, resumed_tests_;
  std::map<std::string, TrialRecord> recorded_;  // a resumed run's trials by id
  int64_t champion_ = -1;                        // set once the generations are done
  MutationKind mutation_ = MutationKind::single;
  struct Ablation {
    bool run = false;
    std::string parent, champion;
    int64_t changes = 0;
    std::vector<std::string> genes_changed, genes;  // genes: one per variant
    std::vector<TrialRecord> variants;
    AblationVerdict verdict;
  } ablation_;
  double previous_wall_ = 0;  // a resumed run's wall time so far
  int64_t invocations_ = 1;
};

}  // namespace dg
