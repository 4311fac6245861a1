// Which of the champion's changes made its gain: the ablation `depthgrad evolve` runs after the
// search. Each gene the champion changed against its parent is applied alone to the parent (a
// single-gene variant, trained on the same trial seeds), and the gains the variants make alone
// decide whether the champion's gain can be attributed to one gene or is confounded. This file is
// the bookkeeping (the variants, the verdict); the search trains the variants.
#pragma once
#include <string>
#include <vector>

#include "tools/attnres/evolve/genome.h"

namespace dg {

struct AblationVariant {
  Gene gene;
  std::string change;    // "schedule: cosine → constant"
  Genome genome;         // the parent with this one gene set to the champion's value
  std::string trial_id;  // "<champion id>-only-<gene>"
};
// One variant per gene in which parent and champion differ, in gene order; none when they differ
// in fewer than two genes (a single change is its own attribution).
std::vector<AblationVariant> ablation_variants(const Genome& parent, const Genome& champion,
                                               const std::string& champion_id);

// A gene carries the gain when, alone, it gives at least this share of the champion's gain.
constexpr double kAttributionShare = 0.5;

struct AblationVerdict {
  double joint_gain = 0;            // parent mean NLL − champion mean NLL (> 0: champion better)
  std::vector<double> gains_alone;  // parent mean − variant mean, per variant (NaN: failed)
  std::vector<std::string> carriers;  // genes whose variant alone gives >= the share of the gain
  bool attributed = false;            // exactly one gene carries the gain
  bool confounded = false;            // several genes changed and no single one is credited
  std::string text;                   // the verdict as the report states it
};
// parent_mean, champion_mean: mean validation NLL over the trial seeds; variant_means per variant
// (NaN for a failed variant); genes: each variant's gene name; changes: how many genes the
// champion changed against its parent.
AblationVerdict judge_ablation(double parent_mean, double champion_mean,
                               const std::vector<double>& variant_means,
                               const std::vector<std::string>& genes, size_t changes);

}  // namespace dg
