// A research direction ("比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由", "widen the model") ->
// the search space of `depthgrad evolve`: which genes a mutation picks and which values it draws.
// The rules are one table of data (direction_rules(): keywords in English and Chinese -> effects
// on genes), stated once in directions.cpp; this header gives the matching semantics only. It
// does not propose genomes (proposals.h) or train them.
//
// Matching: the direction is lower-cased (ASCII only), whitespace runs become one space, and
// everything else is kept, hyphens included (the reference stripped them, so its "rd-attnres"
// term could never match, tools/attnres/PROTOCOL.md §8 item 11). Keywords of all rules are matched
// longest first, and a match consumes its text, so "深度路由" (depth routing) fires the AttnRes
// rule and not also the depth rule's "深度"; an ASCII keyword must start at a word boundary ("lr"
// does not match "world") and may be a prefix ("depth rout" matches "depth routing").
// With any match, genes no rule named keep weight 0.5, except the budget genes (steps, batch),
// which stay fixed (weight 0) so that children are compared at the parent's compute; then each
// matched rule's effects apply, in table order. A direction that matches nothing searches the
// full space: every gene and value with weight 1.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "tools/attnres/evolve/genome.h"

namespace dg {

struct GeneSpace {
  double weight = 0;                  // chance that a mutation picks this gene ∝ weight
  std::vector<std::string> values;    // candidate values (canonical text)
  std::vector<double> value_weights;  // chance of each value ∝ weight
};
struct SearchSpace {
  std::array<GeneSpace, kGeneCount> genes;
  GeneSpace& operator[](Gene g) { return genes[static_cast<size_t>(g)]; }
  const GeneSpace& operator[](Gene g) const { return genes[static_cast<size_t>(g)]; }
};

// ---- the rule table -----------------------------------------------------------------------------

// Which candidate values of a gene an effect changes.
enum class ValuePick {
  none,            // the gene's weight only
  modes,           // the residual modes for which `modes` returns true
  above_baseline,  // integer values greater than the baseline's `compare_to` gene
  below_baseline,  // integer values smaller than the baseline's `compare_to` gene
};
// One effect of a rule on one gene: the gene's weight grows by `gene_weight`; each picked value's
// weight grows by `value_add` and is then multiplied by `value_scale`.
struct GeneEffect {
  Gene gene = Gene::mode;
  double gene_weight = 0;
  ValuePick pick = ValuePick::none;
  bool (*modes)(const ResidualModeInfo&) = nullptr;  // ValuePick::modes: by the registry's traits
  Gene compare_to = Gene::mode;                      // ValuePick::above_baseline / below_baseline
  double value_add = 0;
  double value_scale = 1;
};
struct DirectionRule {
  std::string name;
  std::vector<std::string> keywords;  // English and Chinese, lower case
  std::vector<GeneEffect> effects;
  std::string effect;  // the effects in words (result.json and the reports show it)
};
// The rules, in the order they apply.
const std::vector<DirectionRule>& direction_rules();
std::vector<std::string> direction_rule_names();

// ---- planning -----------------------------------------------------------------------------------

struct RuleMatch {
  std::string rule;
  std::vector<std::string> keywords;  // the keywords that matched, in match order
  std::string effect;
};
struct DirectionPlan {
  std::string text, normalized;
  std::vector<RuleMatch> matches;  // in the order of the rule table
  bool fallback = false;           // nothing matched: the full space
  std::string note;
  // The baseline's residual mode when the command line does not name one: block_attnres (the
  // reference AttnRes, one mutation from rd_attnres), or paper_block_attnres when only the
  // paper_form rule among the mode rules matched.
  ResidualMode centre = residual_mode("block_attnres");
  SearchSpace space;
};
// Lower-cases ASCII letters, turns whitespace runs (and the ideographic space U+3000) into one
// space, trims; keeps hyphens, '/', and every non-ASCII character.
std::string normalize_direction(const std::string& text);
DirectionPlan plan_direction(const std::string& direction, const Genome& baseline);
json::Value direction_plan_json(const DirectionPlan& plan);

}  // namespace dg
