// The search of `depthgrad evolve`: generation 0 trains the baseline; each later generation
// proposes children of the current champion (proposals.h), trains each on the same seeds through
// the TrialTrainer (trials.h) and keeps the best by score = mean validation NLL + z·stderr; ties
// keep the parent. The test split is evaluated once at the end, for the baseline and the champion.
// Writes result.json, report.md and index.html (render.h) after every trial; resumes from a
// result.json. It does not parse flags or load data: the CLI hands it a TrialTrainer.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "tools/attnres/evolve/genome.h"
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

}  // namespace dg
