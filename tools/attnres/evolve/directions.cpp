// The direction rules as one table of data (keywords -> effects on genes), the keyword matcher and
// the search space it produces (see directions.h for the matching semantics).
#include "tools/attnres/evolve/directions.h"

#include <fmt/format.h>

#include <algorithm>

namespace dg {

using json::Array;
using json::Object;
using json::Value;

// The mode picks of the rules, by the registry's traits (nn/lm/residual/residual.h), so a new mode
// falls into the rules its family and V route say.
bool plain_mode(const ResidualModeInfo& m) { return m.family == ResidualFamily::plain; }
bool v_route_mode(const ResidualModeInfo& m) { return m.v_route; }
bool one_route_attnres_mode(const ResidualModeInfo& m) { return !plain_mode(m) && !m.v_route; }
bool paper_mode(const ResidualModeInfo& m) { return m.family == ResidualFamily::paper_attnres; }
// "a", "a and b", "a, b and c": the registered modes a pick takes, for the rules' effect texts.
std::string mode_names(bool (*pick)(const ResidualModeInfo&)) {
  std::vector<std::string> names;
  for (const ResidualModeInfo& m : residual_modes())
    if (pick(m)) names.push_back(m.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// Each rule: its keywords (English, then Chinese), what it does to the search space, and the same
// in words. Effects apply in table order after every gene has weight 0.5 (steps, batch: 0).
const std::vector<DirectionRule>& direction_rules() {
  static const std::vector<DirectionRule> table{
      {"attnres_family",
       {"attnres", "attention residual", "depth rout", "residual", "routing",  //
        "注意力残差", "深度路由", "残差路由", "残差", "路由"},
       {{.gene = Gene::mode,
         .gene_weight = 4,
         .pick = ValuePick::modes,
         .modes = plain_mode,
         .value_scale = 0.25}},
       "residual-mode mutations favoured (+4); modes drawn from the AttnRes family, " +
           mode_names(plain_mode) + " kept as a rare control"},
      {"role_decoupled",
       {"rd-attnres", "rd attnres", "role-decoupled", "role decoupled", "qk/v", "qk-v", "v route",
        "v-route",  //
        "角色解耦"},
       {{.gene = Gene::mode,
         .gene_weight = 4,
         .pick = ValuePick::modes,
         .modes = v_route_mode,
         .value_add = 1}},
       "residual-mode mutations favoured (+4); " + mode_names(v_route_mode) + " more likely"},
      {"block_attnres",
       {"block attnres", "block-attnres", "block attention residual",  //
        "块注意力残差"},
       {{.gene = Gene::mode,
         .gene_weight = 4,
         .pick = ValuePick::modes,
         .modes = one_route_attnres_mode,
         .value_add = 1}},
       "residual-mode mutations favoured (+4); " + mode_names(one_route_attnres_mode) +
           " more likely"},
      {"paper_form",
       {"paper formulation", "paper-faithful", "full attnres",  //
        "论文"},
       {{.gene = Gene::mode,
         .gene_weight = 2,
         .pick = ValuePick::modes,
         .modes = paper_mode,
         .value_add = 1}},
       "residual-mode mutations favoured (+2); the paper formulations more likely"},
      {"width",
       {"width", "wide", "widen", "dimension", "dim",  //
        "宽度", "维度", "加宽"},
       {{.gene = Gene::dim,
         .gene_weight = 3,
         .pick = ValuePick::above_baseline,
         .compare_to = Gene::dim,
         .value_add = 2}},
       "dim mutations favoured (+3); wider models more likely"},
      {"depth",
       {"depth", "deep", "layers",  //
        "深度", "层数", "更深"},
       {{.gene = Gene::layers,
         .gene_weight = 3,
         .pick = ValuePick::above_baseline,
         .compare_to = Gene::layers,
         .value_add = 2}},
       "layers mutations favoured (+3); deeper models more likely"},
      {"learning_rate",
       {"learning rate", "learning-rate", "lr",  //
        "学习率"},
       {{.gene = Gene::lr, .gene_weight = 3}, {.gene = Gene::schedule, .gene_weight = 1}},
       "lr mutations favoured (+3), schedule (+1)"},
      {"schedule",
       {"schedule", "cosine", "warmup",  //
        "调度", "余弦", "预热"},
       {{.gene = Gene::schedule, .gene_weight = 3}},
       "schedule mutations favoured (+3)"},
      {"gqa",
       {"gqa", "grouped-query", "grouped query", "kv",  //
        "分组查询"},
       {{.gene = Gene::kv_heads,
         .gene_weight = 3,
         .pick = ValuePick::below_baseline,
         .compare_to = Gene::heads,
         .value_add = 1}},
       "kv_heads mutations favoured (+3); fewer K/V heads more likely"},
      {"heads",
       {"head",  //
        "注意力头", "多头"},
       {{.gene = Gene::heads, .gene_weight = 3}},
       "heads mutations favoured (+3)"},
      {"budget",
       {"steps", "budget", "compute", "longer",  //
        "步数", "预算", "训练更久"},
       {{.gene = Gene::steps, .gene_weight = 3}},
       "steps mutations allowed (+3): children may train longer or shorter than the parent"},
      {"batch",
       {"batch",  //
        "批大小", "批量"},
       {{.gene = Gene::batch, .gene_weight = 3}},
       "batch mutations allowed (+3)"},
  };
  return table;
}

std::vector<std::string> direction_rule_names() {
  std::vector<std::string> names;
  for (const DirectionRule& r : direction_rules()) names.push_back(r.name);
  return names;
}

std::string normalize_direction(const std::string& text) {
  std::string out;
  bool space = false;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    // ASCII whitespace and the ideographic space U+3000 (E3 80 80) separate words.
    bool ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (c == 0xE3 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
        static_cast<unsigned char>(text[i + 2]) == 0x80) {
      ws = true;
      i += 2;
    }
    if (ws) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c);
  }
  return out;
}

namespace {

// Canonical text of a value for a gene (so "0.0006" and "6e-4" are one value).
std::string canonical(Gene gene, const std::string& value) {
  Genome g;
  set_gene(g, gene, value);
  return gene_value(g, gene);
}

void add_value(GeneSpace& s, const std::string& value, double weight) {
  for (size_t i = 0; i < s.values.size(); ++i)
    if (s.values[i] == value) return;
  s.values.push_back(value);
  s.value_weights.push_back(weight);
}

SearchSpace full_space(const Genome& b) {
  SearchSpace s;
  auto ints = [&](Gene gene, std::vector<int64_t> values, int64_t base) {
    values.push_back(base);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (int64_t v : values)
      if (v >= 1) add_value(s[gene], std::to_string(v), 1.0);
  };
  for (const ResidualModeInfo& m : residual_modes()) add_value(s[Gene::mode], m.name, 1.0);
  ints(Gene::dim, {32, 48, 64, 96, 128}, b.run.model.dim);
  ints(Gene::layers, {2, 3, 4, 6, 8}, b.run.model.layers);
  ints(Gene::heads, {1, 2, 4, 8}, b.run.model.heads);
  ints(Gene::kv_heads, {1, 2, 4, 8}, b.run.model.kv_heads);
  std::vector<double> lrs{3e-4, 6e-4, 1e-3, 2e-3, b.run.training.adamw.lr};
  std::sort(lrs.begin(), lrs.end());
  for (double lr : lrs) add_value(s[Gene::lr], canonical(Gene::lr, fmt::format("{:g}", lr)), 1.0);
  add_value(s[Gene::schedule], "constant", 1.0);
  add_value(s[Gene::schedule], "cosine", 1.0);
  const int64_t steps = b.run.training.steps;
  ints(Gene::steps, {std::max<int64_t>(1, steps / 2), steps * 2}, steps);
  ints(Gene::batch, {2, 4, 8}, b.run.training.batch);
  for (GeneSpace& g : s.genes) g.weight = 1.0;
  return s;
}

int64_t as_int(const std::string& v) { return std::stoll(v); }

// Applies one effect of a matched rule to the space (the baseline decides "above"/"below").
void apply_effect(const GeneEffect& e, SearchSpace& space, const Genome& baseline) {
  GeneSpace& g = space[e.gene];
  g.weight += e.gene_weight;
  if (e.pick == ValuePick::none) return;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const std::string& v = g.values[i];
    bool picked = false;
    switch (e.pick) {
      case ValuePick::none:
        break;
      case ValuePick::modes:
        picked = e.modes(residual_mode(v).info());
        break;
      case ValuePick::above_baseline:
        picked = as_int(v) > as_int(gene_value(baseline, e.compare_to));
        break;
      case ValuePick::below_baseline:
        picked = as_int(v) < as_int(gene_value(baseline, e.compare_to));
        break;
    }
    if (picked) g.value_weights[i] = (g.value_weights[i] + e.value_add) * e.value_scale;
  }
}

bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

DirectionPlan plan_direction(const std::string& direction, const Genome& baseline) {
  DirectionPlan plan;
  plan.text = direction;
  plan.normalized = normalize_direction(direction);
  // Every (keyword, rule), longest keyword first (ties in table order); a match consumes its bytes.
  struct Entry {
    std::string keyword;
    size_t rule;
  };
  const std::vector<DirectionRule>& rules = direction_rules();
  std::vector<Entry> entries;
  for (size_t r = 0; r < rules.size(); ++r)
    for (const std::string& k : rules[r].keywords) entries.push_back({k, r});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.keyword.size() > b.keyword.size();
  });
  std::string work = plan.normalized;
  std::vector<std::vector<std::string>> hits(rules.size());
  for (const Entry& e : entries) {
    const bool ascii = is_ascii(e.keyword);
    for (size_t pos = work.find(e.keyword); pos != std::string::npos;
         pos = work.find(e.keyword, pos + 1)) {
      if (ascii && pos > 0 && ascii_alnum(work[pos - 1]))
        continue;  // must start at a word boundary
      std::fill(work.begin() + pos, work.begin() + pos + e.keyword.size(), '\x1f');
      if (std::find(hits[e.rule].begin(), hits[e.rule].end(), e.keyword) == hits[e.rule].end())
        hits[e.rule].push_back(e.keyword);
    }
  }
  plan.space = full_space(baseline);
  for (size_t r = 0; r < rules.size(); ++r)
    if (!hits[r].empty()) plan.matches.push_back({rules[r].name, hits[r], rules[r].effect});
  auto matched = [&](const char* name) {
    return std::any_of(plan.matches.begin(), plan.matches.end(),
                       [&](const RuleMatch& m) { return m.rule == name; });
  };
  if (matched("paper_form") && !matched("attnres_family") && !matched("role_decoupled") &&
      !matched("block_attnres"))
    plan.centre = residual_mode("paper_block_attnres");
  if (plan.matches.empty()) {
    plan.fallback = true;
    plan.note =
        plan.normalized.empty()
            ? "no direction given: searching the full space (every gene and value, weight 1)"
            : "the direction matched no rule: searching the full space (every gene and value, "
              "weight 1)";
    return plan;
  }
  for (GeneSpace& g : plan.space.genes) g.weight = 0.5;
  plan.space[Gene::steps].weight = 0;  // budget genes stay fixed unless a rule asks for them
  plan.space[Gene::batch].weight = 0;
  for (size_t r = 0; r < rules.size(); ++r)
    if (!hits[r].empty())
      for (const GeneEffect& e : rules[r].effects) apply_effect(e, plan.space, baseline);
  plan.note =
      "genes no rule names keep weight 0.5; steps and batch stay fixed unless the direction names "
      "them";
  return plan;
}

Value direction_plan_json(const DirectionPlan& plan) {
  Object o;
  o.emplace_back("text", plan.text);
  o.emplace_back("normalized", plan.normalized);
  Array matches;
  for (const RuleMatch& m : plan.matches) {
    Object mo;
    mo.emplace_back("rule", m.rule);
    mo.emplace_back("keywords", Array(m.keywords.begin(), m.keywords.end()));
    mo.emplace_back("effect", m.effect);
    matches.emplace_back(std::move(mo));
  }
  o.emplace_back("matched_rules", Value(std::move(matches)));
  o.emplace_back("fallback_full_space", plan.fallback);
  o.emplace_back("centre_mode", residual_mode_name(plan.centre));
  o.emplace_back("note", plan.note);
  double total = 0;
  for (const GeneSpace& g : plan.space.genes) total += g.weight;
  Object space;
  for (Gene gene : kGenes) {
    const GeneSpace& g = plan.space[gene];
    Object go;
    go.emplace_back("weight", g.weight);
    go.emplace_back("probability", total > 0 ? g.weight / total : 0.0);
    Object values;
    for (size_t i = 0; i < g.values.size(); ++i)
      values.emplace_back(g.values[i], g.value_weights[i]);
    go.emplace_back("values", Value(std::move(values)));
    space.emplace_back(gene_name(gene), Value(std::move(go)));
  }
  o.emplace_back("search_space", Value(std::move(space)));
  return Value(std::move(o));
}

}  // namespace dg
