// The records `depthgrad evolve` keeps while it searches (trials, rounds, test evaluations) and
// their result.json form, both ways (resume reads them back). Internal to evolve: the search
// (search.cpp) fills them, the renderers read the JSON. It makes no decisions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/attnres/evolve/genome.h"
#include "tools/attnres/evolve/trials.h"
#include "train/io/json.h"

namespace dg {

// One trial: a genome trained on every seed (or failed), with where it came from.
struct TrialRecord {
  std::string id;
  int64_t generation = 0, slot = 0, draws = 0;
  std::string origin;  // baseline | mutation | crossover
  std::vector<std::string> parents, changes;
  std::string note;
  Genome genome;
  std::vector<SeedMetrics> seeds;
  std::string status = "completed";  // completed | failed
  std::string error;
  double duration = 0;
  TrialScore score;
  bool ok() const { return status == "completed"; }
};

// One generation: its parent, proposals and the selection's decision.
struct RoundRecord {
  int64_t generation = 0;
  std::string parent, runner_up;
  std::vector<std::string> proposals, skipped;
  std::string champion;
  bool improved = false;
  std::string decision;
};

// The test-split evaluation of one trial (the baseline or the champion), once per search.
struct TestRecord {
  std::string role, trial_id;
  std::vector<SeedMetrics> seeds;
  std::vector<bool> reproduced;  // re-trained: the training losses equal the recorded trial's
  std::vector<bool> kept;        // evaluated with the weights kept in memory (no re-training)
  std::string status = "completed", error;
};

json::Value seed_json(const SeedMetrics& m);
SeedMetrics seed_from_json(const json::Value& v);
json::Value strings_json(const std::vector<std::string>& v);
std::vector<std::string> strings_from(const json::Value& v);
// exp(min(nll, 20)), as everywhere in depthgrad.
double perplexity_of(double nll);
// A signed difference in nats, readable at any size: +0.0123 or -4.56e-06.
std::string signed_delta(double d);

json::Value trial_json(const TrialRecord& t);
// The record of a trial as result.json holds it; its score is recomputed with `z`.
TrialRecord trial_from_json(const json::Value& v, double z);
// A generation's record with its proposals and observations (children sorted by score).
json::Value round_json(const RoundRecord& r, const std::vector<TrialRecord>& trials);
json::Value test_json(const TestRecord& r);

// Paired per-seed difference child − parent (same seeds by construction).
struct Paired {
  double mean = 0;
  int64_t lower = 0, n = 0;
};
Paired paired_vs(const TrialRecord& child, const TrialRecord& parent);

}  // namespace dg
