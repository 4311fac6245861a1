// The single-gene variants of an ablation and its verdict (see ablation.h).
#include "tools/attnres/evolve/ablation.h"

#include <fmt/format.h>

#include <cmath>

namespace dg {

std::vector<AblationVariant> ablation_variants(const Genome& parent, const Genome& champion,
                                               const std::string& champion_id) {
  std::vector<AblationVariant> variants;
  for (Gene g : kGenes) {
    const std::string from = gene_value(parent, g), to = gene_value(champion, g);
    if (from == to) continue;
    AblationVariant v{g, fmt::format("{}: {} → {}", gene_name(g), from, to), parent,
                      fmt::format("{}-only-{}", champion_id, gene_name(g))};
    set_gene(v.genome, g, to);
    variants.push_back(std::move(v));
  }
  if (variants.size() < 2) variants.clear();
  return variants;
}

namespace {
std::string nats(double d) { return fmt::format("{:+.4f}", -d); }  // a gain as a change in NLL
}  // namespace

AblationVerdict judge_ablation(double parent_mean, double champion_mean,
                               const std::vector<double>& variant_means,
                               const std::vector<std::string>& genes, size_t changes) {
  AblationVerdict v;
  v.joint_gain = parent_mean - champion_mean;
  if (changes < 2) {
    v.attributed = changes == 1;
    v.text = changes == 1 ? "one gene changed against the parent: the change is its own attribution"
                          : "the champion is its parent: nothing to attribute";
    return v;
  }
  bool failed = false;
  for (size_t i = 0; i < variant_means.size(); ++i) {
    const double gain = parent_mean - variant_means[i];
    v.gains_alone.push_back(std::isfinite(variant_means[i]) ? gain : NAN);
    if (!std::isfinite(variant_means[i])) {
      failed = true;
      continue;
    }
    if (v.joint_gain > 0 && gain >= kAttributionShare * v.joint_gain)
      v.carriers.push_back(genes[i]);
  }
  std::string alone;
  for (size_t i = 0; i < genes.size(); ++i)
    alone += fmt::format("{}{} alone {}", i ? ", " : "", genes[i],
                         std::isfinite(v.gains_alone[i]) ? nats(v.gains_alone[i]) : "failed");
  const std::string together = fmt::format("together {} nats", nats(v.joint_gain));
  if (!(v.joint_gain > 0)) {
    v.text = fmt::format(
        "{} genes changed at once and the champion is not better than its parent "
        "({}; {}): no gain to attribute",
        changes, together, alone);
    return v;
  }
  if (failed) {
    v.confounded = true;
    v.text = fmt::format(
        "confounded: {} genes changed at once and a single-gene variant failed "
        "({}; {})",
        changes, together, alone);
  } else if (v.carriers.size() == 1) {
    v.attributed = true;
    v.text = fmt::format("attributed to {}: alone it gives at least {:.0f}% of the gain ({}; {})",
                         v.carriers[0], 100 * kAttributionShare, together, alone);
  } else if (v.carriers.empty()) {
    v.confounded = true;
    v.text = fmt::format(
        "confounded: {} genes changed at once and no single one gives {:.0f}% of "
        "the gain alone, so the gain needs the combination ({}; {})",
        changes, 100 * kAttributionShare, together, alone);
  } else {
    v.confounded = true;
    v.text = fmt::format(
        "confounded: {} genes changed at once and each of {} alone gives {:.0f}% "
        "or more of the gain, so the ablation cannot credit one ({}; {})",
        changes, fmt::join(v.carriers, ", "), 100 * kAttributionShare, together, alone);
  }
  return v;
}

}  // namespace dg
