// The evolutionary search of `depthgrad evolve` (see evolve.h): genomes, direction rules,
// proposals, scoring, the search loop with resume, and the report/dashboard rendering.
#include "train/experiments/evolve.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "train/io/files.h"
#include "train/batches.h"
#include "train/experiments/report.h"
#include "train/experiments/reproduce.h"
#include "train/experiments/stats.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

// ---- genome -------------------------------------------------------------------------------------

const char* gene_name(Gene g) {
  static const char* names[kGeneCount] = {"mode", "dim",      "layers", "heads", "kv_heads",
                                          "lr",   "schedule", "steps",  "batch"};
  return names[static_cast<size_t>(g)];
}

namespace {
constexpr std::array<Gene, kGeneCount> kGenes{Gene::mode,     Gene::dim,      Gene::layers,
                                              Gene::heads,    Gene::kv_heads, Gene::lr,
                                              Gene::schedule, Gene::steps,    Gene::batch};

int64_t parse_positive(const std::string& text, Gene g) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 1)
    throw std::invalid_argument(
        fmt::format("genome: gene {} needs a positive integer, got '{}'", gene_name(g), text));
  return v;
}
}  // namespace

std::string gene_value(const Genome& g, Gene gene) {
  switch (gene) {
    case Gene::mode:
      return residual_mode_name(g.mode);
    case Gene::dim:
      return std::to_string(g.dim);
    case Gene::layers:
      return std::to_string(g.layers);
    case Gene::heads:
      return std::to_string(g.heads);
    case Gene::kv_heads:
      return std::to_string(g.kv_heads);
    case Gene::lr:
      return fmt::format("{:g}", g.lr);
    case Gene::schedule:
      return g.schedule;
    case Gene::steps:
      return std::to_string(g.steps);
    case Gene::batch:
      return std::to_string(g.batch);
  }
  return "";
}

void set_gene(Genome& g, Gene gene, const std::string& value) {
  switch (gene) {
    case Gene::mode:
      g.mode = parse_residual_mode(value);
      return;
    case Gene::dim:
      g.dim = parse_positive(value, gene);
      return;
    case Gene::layers:
      g.layers = parse_positive(value, gene);
      return;
    case Gene::heads:
      g.heads = parse_positive(value, gene);
      return;
    case Gene::kv_heads:
      g.kv_heads = parse_positive(value, gene);
      return;
    case Gene::lr: {
      size_t used = 0;
      double lr = 0;
      try {
        lr = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || !(lr > 0) || !std::isfinite(lr))
        throw std::invalid_argument(
            fmt::format("genome: gene lr needs a positive number, got '{}'", value));
      g.lr = lr;
      return;
    }
    case Gene::schedule:
      if (value != "constant" && value != "cosine")
        throw std::invalid_argument(
            fmt::format("genome: gene schedule must be constant or cosine, got '{}'", value));
      g.schedule = value;
      return;
    case Gene::steps:
      g.steps = parse_positive(value, gene);
      return;
    case Gene::batch:
      g.batch = parse_positive(value, gene);
      return;
  }
}

std::string genome_key(const Genome& g) {
  std::string key;
  for (Gene gene : kGenes) key += fmt::format("{}={};", gene_name(gene), gene_value(g, gene));
  return key + fmt::format("seq_len={}", g.seq_len);
}

std::string genome_summary(const Genome& g) {
  return fmt::format("{} d{} L{} h{}/kv{} lr {} {} {}×{}", residual_mode_name(g.mode), g.dim,
                     g.layers, g.heads, g.kv_heads, gene_value(g, Gene::lr), g.schedule, g.steps,
                     g.batch);
}

MicroLMConfig genome_model_config(const Genome& g, int64_t vocab) {
  MicroLMConfig c;
  c.vocab = vocab;
  c.dim = g.dim;
  c.layers = g.layers;
  c.heads = g.heads;
  c.kv_heads = g.kv_heads;
  c.seq_len = g.seq_len;
  c.mode = g.mode;
  c.validate();
  if (g.schedule != "constant" && g.schedule != "cosine")
    throw std::invalid_argument(
        fmt::format("genome: schedule must be constant or cosine, got '{}'", g.schedule));
  if (g.steps < 1 || g.batch < 1 || !(g.lr > 0))
    throw std::invalid_argument(
        fmt::format("genome: steps, batch and lr must be positive ({})", genome_summary(g)));
  return c;
}

bool genome_is_valid(const Genome& g) {
  try {
    genome_model_config(g, 512);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

Value genome_to_json(const Genome& g) {
  Object o;
  o.emplace_back("mode", residual_mode_name(g.mode));
  o.emplace_back("dim", g.dim);
  o.emplace_back("layers", g.layers);
  o.emplace_back("heads", g.heads);
  o.emplace_back("kv_heads", g.kv_heads);
  o.emplace_back("lr", g.lr);
  o.emplace_back("schedule", g.schedule);
  o.emplace_back("steps", g.steps);
  o.emplace_back("batch", g.batch);
  o.emplace_back("seq_len", g.seq_len);
  return Value(std::move(o));
}

Genome genome_from_json(const Value& v) {
  Genome g;
  g.mode = parse_residual_mode(v.at("mode").as_string());
  g.dim = v.at("dim").as_int();
  g.layers = v.at("layers").as_int();
  g.heads = v.at("heads").as_int();
  g.kv_heads = v.at("kv_heads").as_int();
  g.lr = v.at("lr").as_double();
  g.schedule = v.at("schedule").as_string();
  g.steps = v.at("steps").as_int();
  g.batch = v.at("batch").as_int();
  g.seq_len = v.at("seq_len").as_int();
  return g;
}

// ---- direction -> search space ------------------------------------------------------------------

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

// Adds `delta` to the weight of every value for which `pred` holds.
template <typename Pred>
void bump_values(GeneSpace& s, double delta, Pred pred) {
  for (size_t i = 0; i < s.values.size(); ++i)
    if (pred(s.values[i])) s.value_weights[i] += delta;
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
  for (ResidualMode m :
       {ResidualMode::standard, ResidualMode::block_attnres, ResidualMode::rd_attnres,
        ResidualMode::paper_block_attnres, ResidualMode::paper_rd_attnres})
    add_value(s[Gene::mode], residual_mode_name(m), 1.0);
  ints(Gene::dim, {32, 48, 64, 96, 128}, b.dim);
  ints(Gene::layers, {2, 3, 4, 6, 8}, b.layers);
  ints(Gene::heads, {1, 2, 4, 8}, b.heads);
  ints(Gene::kv_heads, {1, 2, 4, 8}, b.kv_heads);
  std::vector<double> lrs{3e-4, 6e-4, 1e-3, 2e-3, b.lr};
  std::sort(lrs.begin(), lrs.end());
  for (double lr : lrs) add_value(s[Gene::lr], canonical(Gene::lr, fmt::format("{:g}", lr)), 1.0);
  add_value(s[Gene::schedule], "constant", 1.0);
  add_value(s[Gene::schedule], "cosine", 1.0);
  ints(Gene::steps, {std::max<int64_t>(1, b.steps / 2), b.steps * 2}, b.steps);
  ints(Gene::batch, {2, 4, 8}, b.batch);
  for (GeneSpace& g : s.genes) g.weight = 1.0;
  return s;
}

bool is_mode(const std::string& v, std::initializer_list<ResidualMode> modes) {
  for (ResidualMode m : modes)
    if (v == residual_mode_name(m)) return true;
  return false;
}
int64_t as_int(const std::string& v) { return std::stoll(v); }

struct Rule {
  const char* name;
  std::vector<std::string> keywords;
  const char* effect;
  void (*apply)(SearchSpace&, const Genome&);
};

const std::vector<Rule>& rules() {
  using M = ResidualMode;
  static const std::vector<Rule> table{
      {"attnres_family",
       {"attnres", "attention residual", "注意力残差", "depth rout", "深度路由", "残差路由",
        "residual", "残差", "routing", "路由"},
       "residual-mode mutations favoured (+4); modes drawn from the AttnRes family, standard kept "
       "as a rare control",
       [](SearchSpace& s, const Genome&) {
         s[Gene::mode].weight += 4;
         for (size_t i = 0; i < s[Gene::mode].values.size(); ++i)
           s[Gene::mode].value_weights[i] =
               s[Gene::mode].values[i] == residual_mode_name(M::standard) ? 0.25 : 1.0;
       }},
      {"role_decoupled",
       {"rd-attnres", "rd attnres", "role-decoupled", "role decoupled", "角色解耦", "qk/v", "qk-v",
        "v route", "v-route"},
       "residual-mode mutations favoured (+4); rd_attnres and paper_rd_attnres more likely",
       [](SearchSpace& s, const Genome&) {
         s[Gene::mode].weight += 4;
         bump_values(s[Gene::mode], 1.0, [](const std::string& v) {
           return is_mode(v, {M::rd_attnres, M::paper_rd_attnres});
         });
       }},
      {"block_attnres",
       {"block attnres", "block-attnres", "block attention residual", "块注意力残差"},
       "residual-mode mutations favoured (+4); block_attnres and paper_block_attnres more likely",
       [](SearchSpace& s, const Genome&) {
         s[Gene::mode].weight += 4;
         bump_values(s[Gene::mode], 1.0, [](const std::string& v) {
           return is_mode(v, {M::block_attnres, M::paper_block_attnres});
         });
       }},
      {"paper_form",
       {"paper formulation", "paper-faithful", "full attnres", "论文"},
       "residual-mode mutations favoured (+2); the paper formulations more likely",
       [](SearchSpace& s, const Genome&) {
         s[Gene::mode].weight += 2;
         bump_values(s[Gene::mode], 1.0, [](const std::string& v) {
           return is_mode(v, {M::paper_block_attnres, M::paper_rd_attnres});
         });
       }},
      {"width",
       {"width", "wide", "widen", "dimension", "dim", "宽度", "维度", "加宽"},
       "dim mutations favoured (+3); wider models more likely",
       [](SearchSpace& s, const Genome& b) {
         s[Gene::dim].weight += 3;
         bump_values(s[Gene::dim], 2.0, [&](const std::string& v) { return as_int(v) > b.dim; });
       }},
      {"depth",
       {"depth", "deep", "layers", "深度", "层数", "更深"},
       "layers mutations favoured (+3); deeper models more likely",
       [](SearchSpace& s, const Genome& b) {
         s[Gene::layers].weight += 3;
         bump_values(s[Gene::layers], 2.0,
                     [&](const std::string& v) { return as_int(v) > b.layers; });
       }},
      {"learning_rate",
       {"learning rate", "learning-rate", "lr", "学习率"},
       "lr mutations favoured (+3), schedule (+1)",
       [](SearchSpace& s, const Genome&) {
         s[Gene::lr].weight += 3;
         s[Gene::schedule].weight += 1;
       }},
      {"schedule",
       {"schedule", "cosine", "warmup", "调度", "余弦", "预热"},
       "schedule mutations favoured (+3)",
       [](SearchSpace& s, const Genome&) { s[Gene::schedule].weight += 3; }},
      {"gqa",
       {"gqa", "grouped-query", "grouped query", "kv", "分组查询"},
       "kv_heads mutations favoured (+3); fewer K/V heads more likely",
       [](SearchSpace& s, const Genome& b) {
         s[Gene::kv_heads].weight += 3;
         bump_values(s[Gene::kv_heads], 1.0,
                     [&](const std::string& v) { return as_int(v) < b.heads; });
       }},
      {"heads",
       {"head", "注意力头", "多头"},
       "heads mutations favoured (+3)",
       [](SearchSpace& s, const Genome&) { s[Gene::heads].weight += 3; }},
      {"budget",
       {"steps", "budget", "compute", "longer", "步数", "预算", "训练更久"},
       "steps mutations allowed (+3): children may train longer or shorter than the parent",
       [](SearchSpace& s, const Genome&) { s[Gene::steps].weight += 3; }},
      {"batch",
       {"batch", "批大小", "批量"},
       "batch mutations allowed (+3)",
       [](SearchSpace& s, const Genome&) { s[Gene::batch].weight += 3; }},
  };
  return table;
}

bool ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

}  // namespace

std::vector<std::string> direction_rule_names() {
  std::vector<std::string> names;
  for (const Rule& r : rules()) names.push_back(r.name);
  return names;
}

DirectionPlan plan_direction(const std::string& direction, const Genome& baseline) {
  DirectionPlan plan;
  plan.text = direction;
  plan.normalized = normalize_direction(direction);
  // Every (keyword, rule), longest keyword first (ties in table order); a match consumes its bytes.
  struct Entry {
    std::string keyword;
    size_t rule;
  };
  std::vector<Entry> entries;
  for (size_t r = 0; r < rules().size(); ++r)
    for (const std::string& k : rules()[r].keywords) entries.push_back({k, r});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.keyword.size() > b.keyword.size();
  });
  std::string work = plan.normalized;
  std::vector<std::vector<std::string>> hits(rules().size());
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
  for (size_t r = 0; r < rules().size(); ++r)
    if (!hits[r].empty()) plan.matches.push_back({rules()[r].name, hits[r], rules()[r].effect});
  auto matched = [&](const char* name) {
    return std::any_of(plan.matches.begin(), plan.matches.end(),
                       [&](const RuleMatch& m) { return m.rule == name; });
  };
  if (matched("paper_form") && !matched("attnres_family") && !matched("role_decoupled") &&
      !matched("block_attnres"))
    plan.centre = ResidualMode::paper_block_attnres;
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
  for (size_t r = 0; r < rules().size(); ++r)
    if (!hits[r].empty()) rules()[r].apply(plan.space, baseline);
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

// ---- proposals ----------------------------------------------------------------------------------

uint64_t ProposalRng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double ProposalRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

size_t ProposalRng::pick(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += std::max(0.0, w);
  if (!(total > 0)) throw std::logic_error("ProposalRng::pick: no positive weight");
  double u = uniform() * total;
  size_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0)) continue;
    last = i;
    if (u < weights[i]) return i;
    u -= weights[i];
  }
  return last;  // rounding
}

Proposal mutate(const Genome& parent, const SearchSpace& space, ProposalRng& rng) {
  Proposal p{parent, "mutation", {}};
  const int genes_to_change = rng.uniform() < 0.3 ? 2 : 1;
  std::vector<double> gene_weights(kGeneCount, 0.0);
  auto refresh = [&](size_t i) {
    const GeneSpace& g = space.genes[i];
    const std::string current = gene_value(p.genome, kGenes[i]);
    bool alternative = false;
    for (size_t v = 0; v < g.values.size(); ++v)
      alternative |= g.values[v] != current && g.value_weights[v] > 0;
    return alternative ? g.weight : 0.0;
  };
  std::vector<bool> used(kGeneCount, false);
  for (int k = 0; k < genes_to_change; ++k) {
    for (size_t i = 0; i < kGeneCount; ++i) gene_weights[i] = used[i] ? 0.0 : refresh(i);
    if (std::none_of(gene_weights.begin(), gene_weights.end(), [](double w) { return w > 0; }))
      break;
    const size_t i = rng.pick(gene_weights);
    used[i] = true;
    const GeneSpace& g = space.genes[i];
    const std::string current = gene_value(p.genome, kGenes[i]);
    std::vector<double> vw = g.value_weights;
    for (size_t v = 0; v < vw.size(); ++v)
      if (g.values[v] == current) vw[v] = 0;
    const std::string& value = g.values[rng.pick(vw)];
    p.changes.push_back(fmt::format("{}: {} → {}", gene_name(kGenes[i]), current, value));
    set_gene(p.genome, kGenes[i], value);
  }
  return p;
}

Proposal crossover(const Genome& a, const Genome& b, const std::string& b_id, ProposalRng& rng) {
  Proposal p{a, "crossover", {}};
  std::vector<Gene> differing;
  for (Gene g : kGenes)
    if (gene_value(a, g) != gene_value(b, g)) differing.push_back(g);
  if (differing.empty()) return p;
  std::vector<bool> take(differing.size());
  size_t taken = 0;
  for (size_t i = 0; i < differing.size(); ++i) taken += (take[i] = rng.uniform() < 0.5) ? 1 : 0;
  const size_t k = static_cast<size_t>(rng.next() % differing.size());
  if (taken == 0)
    take[k] = true;  // not a copy of a
  else if (taken == differing.size() && differing.size() > 1)
    take[k] = false;  // nor of b
  for (size_t i = 0; i < differing.size(); ++i) {
    if (!take[i]) continue;
    const std::string from = gene_value(p.genome, differing[i]), to = gene_value(b, differing[i]);
    p.changes.push_back(
        fmt::format("{}: {} → {} (from {})", gene_name(differing[i]), from, to, b_id));
    set_gene(p.genome, differing[i], to);
  }
  return p;
}

GenerationPlan propose_generation(int64_t generation, int64_t population, uint64_t seed,
                                  const SearchSpace& space, const std::string& champion_id,
                                  const Genome& champion, const std::string& runner_up_id,
                                  const Genome* runner_up, std::vector<std::string>& seen_keys) {
  GenerationPlan plan;
  // The stream depends on (seed, generation) only; a distinct constant keeps it apart from the
  // training seeds.
  ProposalRng mix(seed ^ 0x65766F6C76650000ull);  // "evolve"
  const uint64_t base = mix.next();
  ProposalRng rng(
      ProposalRng(base ^ (static_cast<uint64_t>(generation) * 0xD1B54A32D192ED03ull)).next());
  for (int64_t slot = 1; slot <= population; ++slot) {
    const bool cross_slot = runner_up != nullptr && population >= 2 && slot == population;
    bool accepted = false;
    for (int64_t draw = 1; draw <= kMaxDraws && !accepted; ++draw) {
      const bool cross = cross_slot && draw <= kMaxDraws / 2;  // then fall back to mutations
      Proposal p =
          cross ? crossover(champion, *runner_up, runner_up_id, rng) : mutate(champion, space, rng);
      if (p.changes.empty() || !genome_is_valid(p.genome)) continue;
      const std::string key = genome_key(p.genome);
      if (std::find(seen_keys.begin(), seen_keys.end(), key) != seen_keys.end()) continue;
      seen_keys.push_back(key);
      ProposedTrial t;
      t.trial_id = fmt::format("g{}-t{}", generation, slot);
      t.slot = slot;
      t.parents = {champion_id};
      if (cross) t.parents.push_back(runner_up_id);
      t.proposal = std::move(p);
      t.draws = draw;
      if (cross_slot && !cross)
        t.note = fmt::format("crossover slot: no new child of {} × {} in {} draws, so a mutation",
                             champion_id, runner_up_id, kMaxDraws / 2);
      plan.trials.push_back(std::move(t));
      accepted = true;
    }
    if (!accepted)
      plan.skipped.push_back(
          fmt::format("g{}-t{}: no new buildable genome in {} draws", generation, slot, kMaxDraws));
  }
  return plan;
}

// ---- scoring ------------------------------------------------------------------------------------

TrialScore score_trial(const std::vector<double>& nll, double z) {
  TrialScore s;
  if (nll.empty()) throw std::invalid_argument("score_trial: no seeds");
  s.mean = mean_of(nll);
  s.std = sample_std(nll);
  s.sem = nll.size() > 1 ? s.std / std::sqrt(static_cast<double>(nll.size())) : 0.0;
  s.score = s.mean + z * s.sem;
  return s;
}

// ---- the real trainer ---------------------------------------------------------------------------

TrainerConfig genome_trainer_config(const Genome& g, uint64_t seed, int64_t vocab) {
  TrainerConfig c;
  c.model = genome_model_config(g, vocab);
  c.steps = g.steps;
  c.batch = g.batch;
  c.clip = 1.0;
  c.adamw.lr = g.lr;
  c.adamw.decay = DecayPolicy::matrices_only;
  const int64_t warmup = g.schedule == "cosine" ? std::max<int64_t>(1, g.steps / 20) : 0;
  c.schedule = Schedule::parse(g.schedule, g.lr, warmup, g.steps);
  c.init = InitScheme::identical;
  c.seed = seed;
  return c;
}

std::vector<int64_t> evolve_eval_starts(int64_t split_length, int64_t seq_len,
                                        int64_t eval_windows) {
  return eval_windows > 0 ? reference_eval_starts(split_length, seq_len, eval_windows)
                          : full_eval_starts(split_length, seq_len);
}

TrialTrainer make_micro_lm_trainer(const std::vector<int32_t>& train,
                                   const std::vector<int32_t>& validation,
                                   const std::vector<int32_t>& test, int64_t vocab,
                                   int64_t eval_windows,
                                   std::function<void(const TrialRun&, const StepLog&)> on_step) {
  return [&train, &validation, &test, vocab, eval_windows, on_step](const TrialRun& run) {
    const auto start = std::chrono::steady_clock::now();
    const TrainerConfig config = genome_trainer_config(run.genome, run.seed, vocab);
    auto trainer = std::make_shared<Trainer>(config, train);
    std::function<void(const StepLog&)> step_log;
    if (on_step) step_log = [&on_step, &run](const StepLog& log) { on_step(run, log); };
    trainer->run(config.steps, step_log);
    const std::vector<double>& losses = trainer->losses();
    const size_t k = std::min<size_t>(10, losses.size());
    SeedMetrics m;
    m.seed = run.seed;
    if (k > 0) {
      m.initial_loss =
          std::accumulate(losses.begin(), losses.begin() + k, 0.0) / static_cast<double>(k);
      m.final_loss = std::accumulate(losses.end() - k, losses.end(), 0.0) / static_cast<double>(k);
    }
    m.parameters = trainer->model().parameter_count();
    const int64_t seq_len = config.model.seq_len;
    auto evaluate = [trainer, seq_len, eval_windows,
                     id = run.trial_id](const std::vector<int32_t>& ids) {
      const double nll = evaluate_windows(
          trainer->model(), ids,
          evolve_eval_starts(static_cast<int64_t>(ids.size()), seq_len, eval_windows), seq_len);
      if (!std::isfinite(nll))
        throw std::runtime_error(fmt::format("{}: evaluation NLL is {}", id, nll));
      return nll;
    };
    m.nll = evaluate(run.split == EvalSplit::test ? test : validation);
    m.perplexity = std::exp(std::min(m.nll, 20.0));
    if (run.split == EvalSplit::validation)
      m.evaluate_test = [evaluate, &test] { return evaluate(test); };
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return m;
  };
}

// ---- config <-> json ----------------------------------------------------------------------------

Value evolve_config_json(const EvolveOptions& o) {
  Object c;
  c.emplace_back("model", o.model);
  c.emplace_back("dataset", o.dataset);
  c.emplace_back("direction", o.direction);
  c.emplace_back("generations", o.generations);
  c.emplace_back("population", o.population);
  c.emplace_back("trial_seeds", o.trial_seeds);
  c.emplace_back("seed", static_cast<int64_t>(o.seed));
  c.emplace_back("confidence_z", o.confidence_z);
  c.emplace_back("eval_windows", o.eval_windows);
  c.emplace_back("vocab", o.vocab);
  c.emplace_back("baseline", genome_to_json(o.baseline));
  return Value(std::move(c));
}

EvolveOptions evolve_options_from_config(const Value& c) {
  EvolveOptions o;
  o.model = c.at("model").as_string();
  o.dataset = c.at("dataset").as_string();
  o.direction = c.at("direction").as_string();
  o.generations = c.at("generations").as_int();
  o.population = c.at("population").as_int();
  o.trial_seeds = c.at("trial_seeds").as_int();
  o.seed = static_cast<uint64_t>(c.at("seed").as_int());
  o.confidence_z = c.at("confidence_z").as_double();
  o.eval_windows = c.at("eval_windows").as_int();
  o.vocab = c.at("vocab").as_int();
  o.baseline = genome_from_json(c.at("baseline"));
  return o;
}

// ---- the search ---------------------------------------------------------------------------------

namespace {

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

struct RoundRecord {
  int64_t generation = 0;
  std::string parent, runner_up;
  std::vector<std::string> proposals, skipped;
  std::string champion;
  bool improved = false;
  std::string decision;
};

struct TestRecord {
  std::string role, trial_id;
  std::vector<SeedMetrics> seeds;
  std::vector<bool> reproduced;  // re-trained: the training losses equal the recorded trial's
  std::vector<bool> kept;        // evaluated with the weights kept in memory (no re-training)
  std::string status = "completed", error;
};

Value seed_json(const SeedMetrics& m) {
  Object o;
  o.emplace_back("seed", static_cast<int64_t>(m.seed));
  o.emplace_back("nll", m.nll);
  o.emplace_back("perplexity", m.perplexity);
  o.emplace_back("initial_loss", m.initial_loss);
  o.emplace_back("final_loss", m.final_loss);
  o.emplace_back("parameters", m.parameters);
  o.emplace_back("seconds", m.seconds);
  return Value(std::move(o));
}
SeedMetrics seed_from_json(const Value& v) {
  SeedMetrics m;
  m.seed = static_cast<uint64_t>(v.at("seed").as_int());
  m.nll = v.at("nll").as_double();
  m.perplexity = v.at("perplexity").as_double();
  m.initial_loss = v.at("initial_loss").as_double();
  m.final_loss = v.at("final_loss").as_double();
  m.parameters = v.at("parameters").as_int();
  m.seconds = v.at("seconds").as_double();
  return m;
}
Value strings(const std::vector<std::string>& v) { return Value(Array(v.begin(), v.end())); }
std::vector<std::string> strings_from(const Value& v) {
  std::vector<std::string> out;
  for (const Value& s : v.as_array()) out.push_back(s.as_string());
  return out;
}
double ppl(double nll) { return std::exp(std::min(nll, 20.0)); }
// A signed difference in nats, readable at any size: +0.0123 or -4.56e-06.
std::string signed_delta(double d) {
  return std::abs(d) >= 1e-3 || d == 0 ? fmt::format("{:+.4f}", d) : fmt::format("{:+.2e}", d);
}

Value trial_json(const TrialRecord& t) {
  Object o;
  o.emplace_back("trial_id", t.id);
  o.emplace_back("generation", t.generation);
  o.emplace_back("slot", t.slot);
  o.emplace_back("origin", t.origin);
  o.emplace_back("parents", strings(t.parents));
  o.emplace_back("changes", strings(t.changes));
  o.emplace_back("draws", t.draws);
  o.emplace_back("note", t.note.empty() ? Value() : Value(t.note));
  o.emplace_back("genome", genome_to_json(t.genome));
  o.emplace_back("genome_summary", genome_summary(t.genome));
  Array seeds;
  for (const SeedMetrics& m : t.seeds) seeds.push_back(seed_json(m));
  o.emplace_back("seeds", Value(std::move(seeds)));
  if (t.ok()) {
    o.emplace_back("mean_nll", t.score.mean);
    o.emplace_back("std_nll", t.score.std);
    o.emplace_back("sem_nll", t.score.sem);
    o.emplace_back("score", t.score.score);
    o.emplace_back("perplexity", ppl(t.score.mean));
    o.emplace_back("parameters", t.seeds.empty() ? int64_t{0} : t.seeds[0].parameters);
  } else {
    for (const char* k : {"mean_nll", "std_nll", "sem_nll", "score", "perplexity", "parameters"})
      o.emplace_back(k, nullptr);
  }
  o.emplace_back("duration_seconds", t.duration);
  o.emplace_back("status", t.status);
  o.emplace_back("error", t.error.empty() ? Value() : Value(t.error));
  return Value(std::move(o));
}

TrialRecord trial_from_json(const Value& v, double z) {
  TrialRecord t;
  t.id = v.at("trial_id").as_string();
  t.generation = v.at("generation").as_int();
  t.slot = v.at("slot").as_int();
  t.origin = v.at("origin").as_string();
  t.parents = strings_from(v.at("parents"));
  t.changes = strings_from(v.at("changes"));
  t.draws = v.at("draws").as_int();
  if (const Value* note = v.find("note"); note && !note->is_null()) t.note = note->as_string();
  t.genome = genome_from_json(v.at("genome"));
  for (const Value& s : v.at("seeds").as_array()) t.seeds.push_back(seed_from_json(s));
  t.status = v.at("status").as_string();
  if (!v.at("error").is_null()) t.error = v.at("error").as_string();
  t.duration = v.at("duration_seconds").as_double();
  if (t.ok()) {
    std::vector<double> nll;
    for (const SeedMetrics& m : t.seeds) nll.push_back(m.nll);
    t.score = score_trial(nll, z);
  }
  return t;
}

// Paired per-seed difference child − parent (same seeds by construction).
struct Paired {
  double mean = 0;
  int64_t lower = 0, n = 0;
};
Paired paired_vs(const TrialRecord& child, const TrialRecord& parent) {
  Paired p;
  std::vector<double> d;
  for (const SeedMetrics& c : child.seeds)
    for (const SeedMetrics& q : parent.seeds)
      if (c.seed == q.seed) {
        d.push_back(c.nll - q.nll);
        p.lower += c.nll < q.nll ? 1 : 0;
      }
  p.n = static_cast<int64_t>(d.size());
  p.mean = d.empty() ? 0.0 : mean_of(d);
  return p;
}

class Search {
 public:
  Search(const EvolveOptions& o, const TrialTrainer& trainer, const Value* resume)
      : o_(o), trainer_(trainer), started_(std::chrono::steady_clock::now()) {
    if (o.model != "micro-llm")
      throw std::invalid_argument(
          fmt::format("--model: only micro-llm is supported, got '{}'", o.model));
    if (o.dataset != "wikitext-2")
      throw std::invalid_argument(
          fmt::format("--dataset: only wikitext-2 is supported, got '{}'", o.dataset));
    if (o.generations < 0)
      throw std::invalid_argument(
          fmt::format("--generations: must be >= 0, got {}", o.generations));
    if (o.population < 1)
      throw std::invalid_argument(fmt::format("--population: must be >= 1, got {}", o.population));
    if (o.trial_seeds < 1)
      throw std::invalid_argument(
          fmt::format("--trial-seeds: must be >= 1, got {}", o.trial_seeds));
    if (!(o.confidence_z >= 0) || !std::isfinite(o.confidence_z))
      throw std::invalid_argument(
          fmt::format("--confidence-z: must be finite and >= 0, got {}", o.confidence_z));
    if (o.eval_windows < 0)
      throw std::invalid_argument(
          fmt::format("--eval-windows: must be >= 0, got {}", o.eval_windows));
    if (o.write_files && o.run_dir.empty()) throw std::invalid_argument("evolve: no run directory");
    genome_model_config(o.baseline, o.vocab);  // the baseline must be buildable
    for (int64_t i = 0; i < o.trial_seeds; ++i) seeds_.push_back(o.seed + static_cast<uint64_t>(i));
    plan_ = plan_direction(o.direction, o.baseline);
    std::string dir = o.run_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    run_id_ = dir.empty() ? "in-memory" : dir.substr(dir.find_last_of('/') + 1);
    if (resume) load_resume(*resume);
  }

  EvolveOutput run() {
    say_direction();
    // ---- generation 0: the baseline ----
    TrialRecord base;
    base.id = "g0-t0";
    base.origin = "baseline";
    base.genome = o_.baseline;
    seen_.push_back(genome_key(o_.baseline));
    run_trial(std::move(base));
    if (!trials_[0].ok()) {
      write("failed");
      throw std::runtime_error(
          fmt::format("the baseline trial g0-t0 failed ({}); there is nothing to evolve from",
                      trials_[0].error));
    }
    size_t champion = 0;
    for (int64_t g = 1; g <= o_.generations; ++g) {
      const int64_t runner = runner_up(champion);
      RoundRecord round;
      round.generation = g;
      round.parent = trials_[champion].id;
      if (runner >= 0) round.runner_up = trials_[runner].id;
      const Genome parent_genome = trials_[champion].genome;
      GenerationPlan gp =
          propose_generation(g, o_.population, o_.seed, plan_.space, trials_[champion].id,
                             parent_genome, runner >= 0 ? trials_[runner].id : "",
                             runner >= 0 ? &trials_[runner].genome : nullptr, seen_);
      round.skipped = gp.skipped;
      for (const std::string& s : gp.skipped) say("skipped " + s);
      rounds_.push_back(round);  // visible (with its proposals) while its trials run
      for (ProposedTrial& p : gp.trials) {
        TrialRecord t;
        t.id = p.trial_id;
        t.generation = g;
        t.slot = p.slot;
        t.draws = p.draws;
        t.origin = p.proposal.origin;
        t.parents = p.parents;
        t.changes = p.proposal.changes;
        t.genome = p.proposal.genome;
        t.note = p.note;
        rounds_.back().proposals.push_back(t.id);
        run_trial(std::move(t));
      }
      // ---- selection: strictly lower score replaces the parent; ties keep it ----
      size_t best = champion;
      int64_t best_child = -1;
      for (size_t i = 0; i < trials_.size(); ++i) {
        if (trials_[i].generation != g || !trials_[i].ok()) continue;
        if (best_child < 0 || trials_[i].score.score < trials_[best_child].score.score)
          best_child = static_cast<int64_t>(i);
        if (trials_[i].score.score < trials_[best].score.score - kScoreTieTolerance) best = i;
      }
      RoundRecord& r = rounds_.back();
      const TrialRecord& parent = trials_[champion];
      if (best != champion) {
        const TrialRecord& c = trials_[best];
        Paired p = paired_vs(c, parent);
        r.decision = fmt::format(
            "{} replaces {} as champion: score {:.4f} < {:.4f} (Δ score {}; mean NLL Δ {}; paired "
            "over {} seed(s): mean {}, lower on {}/{})",
            c.id, parent.id, c.score.score, parent.score.score,
            signed_delta(c.score.score - parent.score.score),
            signed_delta(c.score.mean - parent.score.mean), p.n, signed_delta(p.mean), p.lower,
            p.n);
        r.improved = true;
      } else if (best_child >= 0) {
        const TrialRecord& c = trials_[best_child];
        r.decision = fmt::format(
            "{} stays champion: the best child {} scored {:.4f} (Δ {:+.2e}), not lower than {:.4f} "
            "by more than {:g} "
            "(ties keep the parent)",
            parent.id, c.id, c.score.score, c.score.score - parent.score.score, parent.score.score,
            kScoreTieTolerance);
      } else {
        r.decision = fmt::format("{} stays champion: no child completed", parent.id);
      }
      champion = best;
      r.champion = trials_[champion].id;
      // Only the baseline's and the champion's trained weights are needed later (the test split).
      for (size_t i = 1; i < trials_.size(); ++i)
        if (i != champion)
          for (SeedMetrics& m : trials_[i].seeds) m.evaluate_test = nullptr;
      say(fmt::format("generation {}: {}", g, r.decision));
      write("running");
    }
    champion_ = champion;
    // ---- the test split, once: the baseline and the champion ----
    if (resumed_tests_.size() == (champion == 0 ? 1u : 2u) &&
        resumed_tests_[0].trial_id == trials_[0].id &&
        resumed_tests_.back().trial_id == trials_[champion].id) {
      tests_ = resumed_tests_;
      say("test results: recorded earlier (resume)");
    } else {
      tests_.push_back(run_test("baseline", trials_[0]));
      if (champion != 0) tests_.push_back(run_test("champion", trials_[champion]));
    }
    write("complete");
    EvolveOutput out;
    out.result = build("complete");
    out.summary = summary(out.result);
    return out;
  }

 private:
  void say(const std::string& s) const {
    if (o_.on_message) o_.on_message(s);
  }

  void say_direction() const {
    say(fmt::format("direction: \"{}\" (normalized: \"{}\")", plan_.text, plan_.normalized));
    for (const RuleMatch& m : plan_.matches) {
      std::string kws;
      for (const std::string& k : m.keywords)
        kws += (kws.empty() ? "" : ", ") + fmt::format("\"{}\"", k);
      say(fmt::format("  rule {} matched {}: {}", m.rule, kws, m.effect));
    }
    if (plan_.fallback) say("  note: " + plan_.note);
    double total = 0;
    for (const GeneSpace& g : plan_.space.genes) total += g.weight;
    std::string odds;
    for (Gene gene : kGenes)
      if (plan_.space[gene].weight > 0)
        odds += fmt::format("{}{} {:.0f}%", odds.empty() ? "" : ", ", gene_name(gene),
                            100 * plan_.space[gene].weight / total);
    say("  gene chosen by a mutation: " + odds);
    const GeneSpace& m = plan_.space[Gene::mode];
    double mt = 0;
    for (double w : m.value_weights) mt += w;
    std::string modes;
    for (size_t i = 0; i < m.values.size(); ++i)
      modes += fmt::format("{}{} {:.0f}%", modes.empty() ? "" : ", ", m.values[i],
                           100 * m.value_weights[i] / mt);
    say("  residual modes (before excluding the parent's): " + modes);
  }

  void load_resume(const Value& r) {
    if (!(r.at("config") == evolve_config_json(o_)))
      throw std::invalid_argument(
          "--resume: the search settings differ from the recorded run's config; resume with the "
          "recorded settings");
    if (const Value* ds = r.find("dataset"); ds && ds->is_object() && o_.dataset_info.is_object()) {
      const Value* a = ds->find("tokenizer_sha256");
      const Value* b = o_.dataset_info.find("tokenizer_sha256");
      if (a && b && !(*a == *b))
        throw std::invalid_argument(
            "--resume: the tokenizer differs from the recorded run's (other data?)");
    }
    for (const Value& t : r.at("trials").as_array()) {
      TrialRecord rec = trial_from_json(t, o_.confidence_z);
      recorded_[rec.id] = rec;
    }
    if (const Value* prev = r.find("runtime")) {
      previous_wall_ = prev->at("wall_seconds").as_double();
      sessions_ = prev->at("sessions").as_int() + 1;
      if (const Value* th = prev->find("threads"); th && th->as_int() != o_.threads)
        say(
            fmt::format("warning: the run used {} thread(s), this session {}; results may differ "
                        "in the last bits",
                        th->as_int(), o_.threads));
    }
    if (const Value* tests = r.find("test");
        tests && tests->is_object() && r.at("status").as_string() == "complete") {
      for (const char* role : {"baseline", "champion"}) {
        const Value* t = tests->find(role);
        if (!t || t->is_null()) continue;
        TestRecord tr;
        tr.role = role;
        tr.trial_id = t->at("trial_id").as_string();
        tr.status = t->at("status").as_string();
        if (!t->at("error").is_null()) tr.error = t->at("error").as_string();
        for (const Value& s : t->at("seeds").as_array()) {
          tr.seeds.push_back(seed_from_json(s));
          tr.reproduced.push_back(s.at("reproduces_training").as_bool());
          tr.kept.push_back(s.at("weights").as_string() == "kept in memory");
        }
        resumed_tests_.push_back(tr);
      }
    }
  }

  // Trains a trial on every seed (or takes it from the resumed record), scores it, records it.
  void run_trial(TrialRecord t) {
    const std::string summary = genome_summary(t.genome);
    auto it = recorded_.find(t.id);
    if (it != recorded_.end()) {
      if (!(it->second.genome == t.genome))
        throw std::runtime_error(fmt::format(
            "--resume: trial {} was recorded with genome {} but the search now proposes {}; "
            "the run was written by another version or settings",
            t.id, genome_summary(it->second.genome), summary));
      t = it->second;
      say(fmt::format("{} {}: recorded earlier ({})", t.id, summary,
                      t.ok() ? fmt::format("score {:.4f}", t.score.score) : "failed"));
      trials_.push_back(std::move(t));
      return;
    }
    if (o_.on_trial) o_.on_trial(t.id, static_cast<int64_t>(trials_.size()), planned_trials());
    std::string what = t.origin == "baseline"
                           ? "baseline"
                           : fmt::format("{} of {}", t.origin, fmt::join(t.parents, " × "));
    if (!t.changes.empty()) what += ": " + fmt::format("{}", fmt::join(t.changes, ", "));
    if (!t.note.empty()) what += "; " + t.note;
    say(fmt::format("{} {} ({})", t.id, summary, what));
    const auto start = std::chrono::steady_clock::now();
    try {
      for (size_t i = 0; i < seeds_.size(); ++i) {
        TrialRun run{t.id, t.genome, seeds_[i], i, seeds_.size(), EvalSplit::validation};
        t.seeds.push_back(trainer_(run));
      }
      std::vector<double> nll;
      for (const SeedMetrics& m : t.seeds) nll.push_back(m.nll);
      t.score = score_trial(nll, o_.confidence_z);
      if (!std::isfinite(t.score.score))
        throw std::runtime_error(fmt::format("score is {}", t.score.score));
    } catch (const std::exception& e) {
      t.status = "failed";
      t.error = e.what();
    }
    t.duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t.ok())
      say(
          fmt::format("  {}: NLL {:.4f} ± {:.4f} (std over {} seed(s)) → score {:.4f}, perplexity "
                      "{:.2f} ({:.1f} s)",
                      t.id, t.score.mean, t.score.std, t.seeds.size(), t.score.score,
                      ppl(t.score.mean), t.duration));
    else
      say(fmt::format("  {}: FAILED: {} ({:.1f} s); the search goes on", t.id, t.error,
                      t.duration));
    trials_.push_back(std::move(t));
    write("running");
  }

  // The test split, once per role: the trained weights kept in memory are evaluated on the test
  // windows; a seed without them (a trial of an earlier session) is re-trained deterministically
  // (same genome, seed and options) and checked against its recorded training losses.
  TestRecord run_test(const std::string& role, const TrialRecord& t) {
    TestRecord r;
    r.role = role;
    r.trial_id = t.id;
    if (o_.on_trial)
      o_.on_trial(t.id + " (test)", static_cast<int64_t>(trials_.size()), planned_trials());
    try {
      for (size_t i = 0; i < seeds_.size(); ++i) {
        const SeedMetrics* kept = nullptr;
        for (const SeedMetrics& v : t.seeds)
          if (v.seed == seeds_[i] && v.evaluate_test) kept = &v;
        if (kept) {
          SeedMetrics m = *kept;
          m.nll = kept->evaluate_test();
          m.perplexity = ppl(m.nll);
          m.evaluate_test = nullptr;
          r.seeds.push_back(m);
          r.reproduced.push_back(true);
          r.kept.push_back(true);
          continue;
        }
        TrialRun run{t.id, t.genome, seeds_[i], i, seeds_.size(), EvalSplit::test};
        SeedMetrics m = trainer_(run);
        m.evaluate_test = nullptr;
        bool same = false;
        for (const SeedMetrics& v : t.seeds)
          if (v.seed == m.seed)
            same = v.final_loss == m.final_loss && v.initial_loss == m.initial_loss;
        r.seeds.push_back(m);
        r.reproduced.push_back(same);
        r.kept.push_back(false);
        if (!same)
          say(fmt::format(
              "  warning: re-training {} seed {} did not reproduce its recorded training losses",
              t.id, m.seed));
      }
      const size_t kept = static_cast<size_t>(std::count(r.kept.begin(), r.kept.end(), true));
      say(fmt::format(
          "test split: {} {} ({}): {}", role, t.id, genome_summary(t.genome),
          kept == seeds_.size()
              ? std::string("evaluated with the weights kept in memory")
              : fmt::format("{} of {} seed(s) re-trained deterministically (weights not in memory)",
                            seeds_.size() - kept, seeds_.size())));
    } catch (const std::exception& e) {
      r.status = "failed";
      r.error = e.what();
      say(fmt::format("  test of {} FAILED: {}", t.id, r.error));
    }
    return r;
  }

  int64_t planned_trials() const { return 1 + o_.generations * o_.population + 2; }

  // The best completed trial other than the champion (lower score; earlier trial on ties), or -1.
  int64_t runner_up(size_t champion) const {
    int64_t best = -1;
    for (size_t i = 0; i < trials_.size(); ++i) {
      if (i == champion || !trials_[i].ok() || trials_[i].genome == trials_[champion].genome)
        continue;
      if (best < 0 || trials_[i].score.score < trials_[best].score.score)
        best = static_cast<int64_t>(i);
    }
    return best;
  }

  size_t current_champion() const {
    if (champion_ >= 0) return static_cast<size_t>(champion_);
    for (auto it = rounds_.rbegin(); it != rounds_.rend(); ++it)
      if (!it->champion.empty())
        for (size_t i = 0; i < trials_.size(); ++i)
          if (trials_[i].id == it->champion) return i;
    return 0;
  }

  std::vector<std::string> lineage(size_t champion) const {
    std::vector<std::string> chain;
    std::string id = trials_[champion].id;
    while (!id.empty()) {
      chain.insert(chain.begin(), id);
      std::string next;
      for (const TrialRecord& t : trials_)
        if (t.id == id && !t.parents.empty()) next = t.parents[0];
      id = next;
    }
    return chain;
  }

  Value test_json(const TestRecord& r) const {
    Object o;
    o.emplace_back("trial_id", r.trial_id);
    Array seeds;
    std::vector<double> nll;
    for (size_t i = 0; i < r.seeds.size(); ++i) {
      Value s = seed_json(r.seeds[i]);
      s["weights"] = r.kept[i] ? "kept in memory" : "re-trained deterministically";
      s["reproduces_training"] = static_cast<bool>(r.reproduced[i]);
      seeds.push_back(std::move(s));
      nll.push_back(r.seeds[i].nll);
    }
    o.emplace_back("seeds", Value(std::move(seeds)));
    const bool ok = r.status == "completed" && !nll.empty();
    o.emplace_back("mean_nll", ok ? Value(mean_of(nll)) : Value());
    o.emplace_back("std_nll", ok ? Value(sample_std(nll)) : Value());
    o.emplace_back("perplexity", ok ? Value(ppl(mean_of(nll))) : Value());
    o.emplace_back("status", r.status);
    o.emplace_back("error", r.error.empty() ? Value() : Value(r.error));
    return Value(std::move(o));
  }

  Value build(const std::string& status) const {
    Value result;
    result["schema_version"] = 1;
    result["command"] = "evolve";
    result["run_id"] = run_id_;
    result["status"] = status;
    result["config"] = evolve_config_json(o_);
    Value protocol;
    protocol["training_seeds"] = [&] {
      Array a;
      for (uint64_t s : seeds_) a.emplace_back(static_cast<int64_t>(s));
      return Value(std::move(a));
    }();
    protocol["score"] = fmt::format(
        "mean validation NLL + {} · (sample std / √seeds); lower is better; ties keep the parent",
        o_.confidence_z);
    protocol["validation"] =
        o_.eval_windows > 0
            ? fmt::format(
                  "the first {} non-overlapping windows of {} tokens of the validation split",
                  o_.eval_windows, o_.baseline.seq_len)
            : std::string("every non-overlapping window of the validation split");
    protocol["test"] =
        "evaluated once, after the search, for the baseline and the champion only, on the same "
        "number of windows from the "
        "test split's start; the trained weights of the baseline and the current champion are kept "
        "in memory for it (nothing "
        "is re-trained); a trial trained by an earlier session of a resumed run is re-trained "
        "deterministically (same genome, "
        "seeds, options and data order) and its training losses are checked against the recorded "
        "ones (reproduces_training)";
    protocol["training"] =
        "dg::Trainer: identical init, AdamW (β 0.9/0.999, weight decay 0.01 on matrices only), "
        "clip 1.0, cosine = 5% "
        "warmup then cosine to 10% of the peak; batches are the reference's random windows of the "
        "full train split";
    protocol["proposals"] = fmt::format(
        "per generation: mutations of the champion (1 gene, or 2 with probability 0.3) and, once a "
        "runner-up "
        "exists, a crossover of champion and runner-up in the last slot; seen or unbuildable "
        "genomes are "
        "re-drawn up to {} times, never re-trained",
        kMaxDraws);
    result["protocol"] = protocol;
    result["direction"] = direction_plan_json(plan_);
    result["dataset"] = o_.dataset_info;
    Array trials;
    for (const TrialRecord& t : trials_) trials.push_back(trial_json(t));
    result["trials"] = Value(std::move(trials));
    Array rounds;
    for (const RoundRecord& r : rounds_) rounds.push_back(round_json(r));
    result["rounds"] = Value(std::move(rounds));
    if (!trials_.empty() && trials_[0].ok()) {
      const size_t c = current_champion();
      const TrialRecord& t = trials_[c];
      Value ch;
      ch["trial_id"] = t.id;
      ch["genome"] = genome_to_json(t.genome);
      ch["genome_summary"] = genome_summary(t.genome);
      ch["mean_nll"] = t.score.mean;
      ch["std_nll"] = t.score.std;
      ch["score"] = t.score.score;
      ch["perplexity"] = ppl(t.score.mean);
      ch["lineage"] = strings(lineage(c));
      std::vector<std::string> diff;
      for (Gene g : kGenes)
        if (gene_value(trials_[0].genome, g) != gene_value(t.genome, g))
          diff.push_back(fmt::format("{}: {} → {}", gene_name(g), gene_value(trials_[0].genome, g),
                                     gene_value(t.genome, g)));
      ch["changes_from_baseline"] = strings(diff);
      ch["final"] = status == "complete";
      result["champion"] = ch;
    } else {
      result["champion"] = Value();
    }
    Value test;
    if (!tests_.empty()) {
      test["split"] = "test";
      test["baseline"] = test_json(tests_[0]);
      test["champion"] = tests_.size() > 1 ? test_json(tests_[1]) : test_json(tests_[0]);
      test["champion_is_baseline"] = tests_.size() == 1;
    }
    result["test"] = test;
    Value rt;
    rt["wall_seconds"] =
        previous_wall_ +
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    rt["sessions"] = sessions_;
    rt["threads"] = o_.threads;
    result["runtime"] = rt;
    result["provenance"] = provenance_json(o_.threads);
    if (!o_.run_dir.empty()) {
      Value art;
      art["directory"] = o_.run_dir;
      art["result"] = o_.run_dir + "/result.json";
      art["report"] = o_.run_dir + "/report.md";
      art["dashboard"] = o_.run_dir + "/index.html";
      result["artifacts"] = art;
    }
    return result;
  }

  Value round_json(const RoundRecord& r) const {
    auto find = [&](const std::string& id) -> const TrialRecord* {
      for (const TrialRecord& t : trials_)
        if (t.id == id) return &t;
      return nullptr;
    };
    Object o;
    o.emplace_back("generation", r.generation);
    o.emplace_back("parent", r.parent);
    o.emplace_back("runner_up", r.runner_up.empty() ? Value() : Value(r.runner_up));
    Array proposals;
    std::vector<const TrialRecord*> children;
    for (const std::string& id : r.proposals) {
      const TrialRecord* t = find(id);
      if (!t) continue;
      children.push_back(t);
      Object p;
      p.emplace_back("trial_id", t->id);
      p.emplace_back("origin", t->origin);
      p.emplace_back("parents", strings(t->parents));
      p.emplace_back("changes", strings(t->changes));
      p.emplace_back("draws", t->draws);
      p.emplace_back("note", t->note.empty() ? Value() : Value(t->note));
      proposals.emplace_back(std::move(p));
    }
    o.emplace_back("proposals", Value(std::move(proposals)));
    o.emplace_back("skipped", strings(r.skipped));
    std::stable_sort(children.begin(), children.end(),
                     [](const TrialRecord* a, const TrialRecord* b) {
                       if (a->ok() != b->ok()) return a->ok();
                       return a->ok() && a->score.score < b->score.score;
                     });
    const TrialRecord* parent = find(r.parent);
    Array obs;
    for (const TrialRecord* t : children) {
      Object ob;
      ob.emplace_back("trial_id", t->id);
      ob.emplace_back("status", t->status);
      ob.emplace_back("mean_nll", t->ok() ? Value(t->score.mean) : Value());
      ob.emplace_back("score", t->ok() ? Value(t->score.score) : Value());
      if (t->ok() && parent && parent->ok()) {
        Paired p = paired_vs(*t, *parent);
        ob.emplace_back("paired_mean_difference_vs_parent", p.mean);
        ob.emplace_back("seeds_lower_than_parent", p.lower);
      }
      obs.emplace_back(std::move(ob));
    }
    o.emplace_back("observations", Value(std::move(obs)));
    o.emplace_back("parent_score", parent && parent->ok() ? Value(parent->score.score) : Value());
    o.emplace_back("champion", r.champion.empty() ? Value() : Value(r.champion));
    const TrialRecord* ch = find(r.champion);
    o.emplace_back("champion_score", ch && ch->ok() ? Value(ch->score.score) : Value());
    o.emplace_back("improved", r.improved);
    o.emplace_back("decision", r.decision.empty() ? Value() : Value(r.decision));
    return Value(std::move(o));
  }

  void write(const std::string& status) const {
    if (!o_.write_files) return;
    make_dirs(o_.run_dir);
    Value result = build(status);
    write_file_atomic(o_.run_dir + "/result.json", json::dump(result, 2) + "\n");
    write_file_atomic(o_.run_dir + "/report.md", render_evolve_markdown(result));
    write_file_atomic(o_.run_dir + "/index.html", render_evolve_html(result));
  }

  std::string summary(const Value& result) const {
    const Value& ch = result.at("champion");
    const TrialRecord& base = trials_[0];
    std::string s;
    s += fmt::format("Champion: {} ({})\n", ch.at("trial_id").as_string(),
                     ch.at("genome_summary").as_string());
    std::vector<std::string> diff = strings_from(ch.at("changes_from_baseline"));
    s += fmt::format("  changes from the baseline: {}\n",
                     diff.empty() ? std::string("none") : fmt::format("{}", fmt::join(diff, ", ")));
    s += fmt::format("  lineage: {}\n", fmt::join(strings_from(ch.at("lineage")), " → "));
    s += fmt::format(
        "Validation NLL: champion {:.4f} ± {:.4f} (score {:.4f}, perplexity {:.2f}); baseline "
        "{:.4f} ± {:.4f} (score {:.4f}, perplexity {:.2f})\n",
        ch.at("mean_nll").as_double(), ch.at("std_nll").as_double(), ch.at("score").as_double(),
        ch.at("perplexity").as_double(), base.score.mean, base.score.std, base.score.score,
        ppl(base.score.mean));
    const Value& test = result.at("test");
    auto test_line = [&](const char* role) {
      const Value& t = test.at(role);
      if (t.at("status").as_string() != "completed")
        return fmt::format("{} {} failed ({})", role, t.at("trial_id").as_string(),
                           t.at("error").as_string());
      return fmt::format("{} {} NLL {:.4f} (perplexity {:.2f})", role, t.at("trial_id").as_string(),
                         t.at("mean_nll").as_double(), t.at("perplexity").as_double());
    };
    s +=
        fmt::format("Test ({}, once): {}; {}\n",
                    o_.eval_windows > 0 ? fmt::format("{} windows", o_.eval_windows) : "full split",
                    test_line("baseline"), test_line("champion"));
    if (!o_.run_dir.empty()) {
      s += fmt::format("Report: {}/report.md\n", o_.run_dir);
      s += fmt::format("Dashboard: {}/index.html\n", o_.run_dir);
    }
    return s;
  }

  const EvolveOptions& o_;
  const TrialTrainer& trainer_;
  std::chrono::steady_clock::time_point started_;
  std::vector<uint64_t> seeds_;
  DirectionPlan plan_;
  std::string run_id_;
  std::vector<std::string> seen_;
  std::vector<TrialRecord> trials_;
  std::vector<RoundRecord> rounds_;
  std::vector<TestRecord> tests_, resumed_tests_;
  std::map<std::string, TrialRecord> recorded_;
  int64_t champion_ = -1;
  double previous_wall_ = 0;
  int64_t sessions_ = 1;
};

}  // namespace

EvolveOutput run_evolution(const EvolveOptions& options, const TrialTrainer& trainer,
                           const Value* resume) {
  Search search(options, trainer, resume);
  return search.run();
}

// ---- rendering ----------------------------------------------------------------------------------

namespace {

const char* kGenerationColors[] = {"#4c4c4c", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                   "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
const char* generation_color(int64_t g) {
  return kGenerationColors[static_cast<size_t>(g) %
                           (sizeof(kGenerationColors) / sizeof(*kGenerationColors))];
}

std::string num(const Value& v, const char* spec = "{:.4f}") {
  if (v.is_null()) return "—";
  return fmt::format(fmt::runtime(spec), v.as_double());
}

std::string joined(const Value& list, const char* sep) {
  std::vector<std::string> parts;
  for (const Value& v : list.as_array()) parts.push_back(v.as_string());
  return fmt::format("{}", fmt::join(parts, sep));
}

// Markdown table cells must not contain '|'.
std::string cell(std::string s) {
  for (size_t p = s.find('|'); p != std::string::npos; p = s.find('|', p + 2))
    s.replace(p, 1, "\\|");
  return s;
}

// Score of every trial in order, coloured by generation; failed trials as red crosses on the x
// axis.
std::string svg_trial_scatter(const Value& result) {
  const Array& trials = result.at("trials").as_array();
  const int width = 640, height = 300, left = 64, right = 16, top = 34, bottom = 46;
  double lo = INFINITY, hi = -INFINITY;
  for (const Value& t : trials)
    if (!t.at("score").is_null()) {
      lo = std::min(lo, t.at("score").as_double());
      hi = std::max(hi, t.at("score").as_double());
    }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">",
      width, height, width, height);
  svg += fmt::format(
      "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">Score per trial (lower is "
      "better), coloured by generation</text>",
      left);
  if (!std::isfinite(lo))
    return svg + "<text x=\"64\" y=\"60\">no completed trial yet</text></svg>";
  const double pad = std::max((hi - lo) * 0.08, 1e-3);
  lo -= pad;
  hi += pad;
  const double pw = width - left - right, ph = height - top - bottom;
  const size_t n = trials.size();
  auto x_of = [&](size_t i) {
    return left + pw * (n == 1 ? 0.5 : (static_cast<double>(i) + 0.5) / static_cast<double>(n));
  };
  auto y_of = [&](double v) { return top + ph * (hi - v) / (hi - lo); };
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>", left, top,
                     left, top + ph);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>", left,
                     top + ph, left + pw, top + ph);
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4.0;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
        "y=\"{:.1f}\" text-anchor=\"end\">{:.3f}</text>",
        left, y_of(v), left + pw, y_of(v), left - 4, y_of(v) + 4, v);
  }
  // The champion's score after each generation, as a step line.
  const Value& rounds = result.at("rounds");
  if (!trials.empty() && !trials[0].at("score").is_null()) {
    double level = trials[0].at("score").as_double();
    double x0 = x_of(0);
    for (const Value& r : rounds.as_array()) {
      if (r.at("champion_score").is_null()) continue;
      double x1 = x0;
      for (size_t i = 0; i < n; ++i)
        if (trials[i].at("generation").as_int() == r.at("generation").as_int()) x1 = x_of(i);
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
          "stroke-dasharray=\"4 3\"/>",
          x0, y_of(level), x1, y_of(level));
      level = r.at("champion_score").as_double();
      x0 = x1;
    }
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\" "
        "stroke-dasharray=\"4 3\"/>",
        x0, y_of(level), x_of(n - 1), y_of(level));
  }
  int64_t max_gen = 0;
  for (size_t i = 0; i < n; ++i) {
    const Value& t = trials[i];
    const int64_t g = t.at("generation").as_int();
    max_gen = std::max(max_gen, g);
    const std::string id = t.at("trial_id").as_string();
    if (n <= 24)
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"end\" transform=\"rotate(-40 {:.1f} "
          "{})\">{}</text>",
          x_of(i), top + ph + 14, x_of(i), top + ph + 14, html_escape(id));
    if (t.at("score").is_null()) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#d62728\" "
          "font-size=\"14\">×<title>{} failed: {}</title></text>",
          x_of(i), top + ph - 4, html_escape(id),
          html_escape(t.at("error").is_null() ? "" : t.at("error").as_string()));
      continue;
    }
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"><title>{} (generation {}): score "
        "{:.4f}, NLL {:.4f} ± {:.4f}\n{}</title></circle>",
        x_of(i), y_of(t.at("score").as_double()), generation_color(g), html_escape(id), g,
        t.at("score").as_double(), t.at("mean_nll").as_double(), t.at("std_nll").as_double(),
        html_escape(t.at("genome_summary").as_string()));
  }
  for (int64_t g = 0; g <= max_gen; ++g)
    svg += fmt::format(
        "<circle cx=\"{}\" cy=\"28\" r=\"4\" fill=\"{}\"/><text x=\"{}\" y=\"31\">gen {}</text>",
        width - right - 60 * (max_gen + 1 - g) + 4, generation_color(g),
        width - right - 60 * (max_gen + 1 - g) + 12, g);
  svg += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">score "
      "(nats)</text>",
      top + ph / 2, top + ph / 2);
  return svg + "</svg>";
}

}  // namespace

std::string render_evolve_markdown(const Value& r) {
  const Value& cfg = r.at("config");
  const Value& dir = r.at("direction");
  std::string md;
  md += fmt::format("# depthgrad evolve: {} on {}\n\n", cfg.at("model").as_string(),
                    cfg.at("dataset").as_string());
  md += fmt::format("Run `{}`, status **{}**.\n\n", r.at("run_id").as_string(),
                    r.at("status").as_string());
  md += fmt::format("## Direction\n\n> {}\n\nNormalized: `{}`\n\n", dir.at("text").as_string(),
                    dir.at("normalized").as_string());
  if (dir.at("fallback_full_space").as_bool())
    md += fmt::format("No rule matched: {}.\n\n", dir.at("note").as_string());
  for (const Value& m : dir.at("matched_rules").as_array())
    md += fmt::format("- rule `{}` matched {}: {}\n", m.at("rule").as_string(),
                      joined(m.at("keywords"), ", "), m.at("effect").as_string());
  md += "\n| gene | chance a mutation picks it | values (weight) |\n|---|---:|---|\n";
  for (const auto& [gene, g] : dir.at("search_space").as_object()) {
    std::vector<std::string> vals;
    for (const auto& [v, w] : g.at("values").as_object())
      vals.push_back(fmt::format("{} ({:g})", v, w.as_double()));
    md += fmt::format("| {} | {:.0f}% | {} |\n", gene, 100 * g.at("probability").as_double(),
                      fmt::join(vals, ", "));
  }
  md += "\n## Result\n\n";
  const Value& ch = r.at("champion");
  const Value& test = r.at("test");
  if (!ch.is_null()) {
    md += fmt::format("Champion{}: **{}** — {}\n\n", ch.at("final").as_bool() ? "" : " so far",
                      ch.at("trial_id").as_string(), ch.at("genome_summary").as_string());
    std::vector<std::string> diff;
    for (const Value& d : ch.at("changes_from_baseline").as_array()) diff.push_back(d.as_string());
    md += fmt::format("Changes from the baseline: {}. Lineage: {}.\n\n",
                      diff.empty() ? std::string("none") : fmt::format("{}", fmt::join(diff, ", ")),
                      joined(ch.at("lineage"), " → "));
    const Value& base = r.at("trials").at(size_t{0});
    md +=
        "| | trial | validation NLL (mean ± std) | score | validation PPL | test NLL | test PPL "
        "|\n|---|---|---:|---:|---:|---:|---:|\n";
    auto row = [&](const char* role, const Value& t) {
      const Value* tt = test.is_object() ? test.find(role) : nullptr;
      md += fmt::format("| {} | {} | {} ± {} | {} | {} | {} | {} |\n", role,
                        t.at("trial_id").as_string(), num(t.at("mean_nll")), num(t.at("std_nll")),
                        num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
                        tt ? num(tt->at("mean_nll")) : "—",
                        tt ? num(tt->at("perplexity"), "{:.2f}") : "—");
    };
    row("baseline", base);
    row("champion", ch);
    if (!test.is_object()) md += "\nThe test split is evaluated when the search finishes.\n";
  }
  md += "\n## Rounds\n\n";
  for (const Value& round : r.at("rounds").as_array()) {
    md += fmt::format("### Generation {} (parent {}{})\n\n", round.at("generation").as_int(),
                      round.at("parent").as_string(),
                      round.at("runner_up").is_null()
                          ? ""
                          : fmt::format(", runner-up {}", round.at("runner_up").as_string()));
    for (const Value& p : round.at("proposals").as_array())
      md += fmt::format(
          "- {} {}: {}{}{}\n", p.at("trial_id").as_string(), p.at("origin").as_string(),
          joined(p.at("changes"), ", "),
          p.at("draws").as_int() > 1 ? fmt::format(" ({} draws)", p.at("draws").as_int()) : "",
          p.at("note").is_null() ? "" : "; " + p.at("note").as_string());
    for (const Value& s : round.at("skipped").as_array())
      md += fmt::format("- skipped {}\n", s.as_string());
    md +=
        "\n| trial | status | mean NLL | score | paired Δ vs parent | seeds lower "
        "|\n|---|---|---:|---:|---:|---:|\n";
    for (const Value& ob : round.at("observations").as_array()) {
      const Value* d = ob.find("paired_mean_difference_vs_parent");
      const Value* w = ob.find("seeds_lower_than_parent");
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", ob.at("trial_id").as_string(),
                        ob.at("status").as_string(), num(ob.at("mean_nll")), num(ob.at("score")),
                        d ? signed_delta(d->as_double()) : "—",
                        w ? std::to_string(w->as_int()) : "—");
    }
    md += fmt::format("\nDecision: {}\n\n", round.at("decision").is_null()
                                                ? std::string("(running)")
                                                : round.at("decision").as_string());
  }
  md +=
      "## All trials\n\n| trial | gen | origin | changes | genome | mean NLL | std | score | PPL | "
      "params | seconds | status |\n"
      "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Value& t : r.at("trials").as_array()) {
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {}{} |\n",
        t.at("trial_id").as_string(), t.at("generation").as_int(), t.at("origin").as_string(),
        cell(joined(t.at("changes"), ", ")), t.at("genome_summary").as_string(),
        num(t.at("mean_nll")), num(t.at("std_nll")), num(t.at("score")),
        num(t.at("perplexity"), "{:.2f}"),
        t.at("parameters").is_null() ? "—" : std::to_string(t.at("parameters").as_int()),
        t.at("duration_seconds").as_double(), t.at("status").as_string(),
        t.at("error").is_null() ? "" : ": " + cell(t.at("error").as_string()));
  }
  const Value& p = r.at("protocol");
  md += "\n## Protocol\n\n";
  std::vector<std::string> seeds;
  for (const Value& s : p.at("training_seeds").as_array())
    seeds.push_back(std::to_string(s.as_int()));
  md += fmt::format("- Training seeds (every trial): {}.\n", fmt::join(seeds, ", "));
  for (const char* k : {"score", "validation", "test", "training", "proposals"})
    md += fmt::format("- {}: {}.\n", k, p.at(k).as_string());
  md +=
      "- Scale: micro models and short budgets. Differences smaller than the seed-to-seed spread "
      "are noise, not findings.\n";
  const Value& prov = r.at("provenance");
  md += fmt::format(
      "\n## Provenance\n\ndepthgrad {} ({}), {}, BLAS {}, {} thread(s), {}; wall time {:.1f} s "
      "over {} session(s).\n",
      prov.at("version").as_string(), prov.at("code_commit").as_string(),
      prov.at("compiler").as_string(), prov.at("blas").as_string(), prov.at("threads").as_int(),
      prov.at("created_at").as_string(), r.at("runtime").at("wall_seconds").as_double(),
      r.at("runtime").at("sessions").as_int());
  return md;
}

std::string render_evolve_html(const Value& r) {
  const Value& cfg = r.at("config");
  const Value& dir = r.at("direction");
  const Value& trials = r.at("trials");
  std::string h;
  h += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>depthgrad evolve "
       "— " +
       html_escape(r.at("run_id").as_string()) +
       "</title>\n<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 "
       "1em;color:#222}"
       "table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid "
       "#ccc;padding:3px 6px;text-align:left}"
       "td.n{text-align:right;font-variant-numeric:tabular-nums}tr.champion{background:#fff6d5}tr."
       "failed{color:#b00}"
       ".muted{color:#666;font-size:13px}svg{display:block;margin:1em 0}</style></head><body>\n";
  h += fmt::format(
      "<h1>depthgrad evolve: {} on {}</h1>\n<p class=\"muted\">run {} · status <b>{}</b></p>\n",
      html_escape(cfg.at("model").as_string()), html_escape(cfg.at("dataset").as_string()),
      html_escape(r.at("run_id").as_string()), html_escape(r.at("status").as_string()));
  h += "<h2>Direction</h2><blockquote>" + html_escape(dir.at("text").as_string()) +
       "</blockquote><ul>";
  for (const Value& m : dir.at("matched_rules").as_array())
    h += fmt::format(
        "<li><code>{}</code> matched {}: {}</li>", html_escape(m.at("rule").as_string()),
        html_escape(joined(m.at("keywords"), ", ")), html_escape(m.at("effect").as_string()));
  if (dir.at("fallback_full_space").as_bool())
    h += "<li>" + html_escape(dir.at("note").as_string()) + "</li>";
  h += "</ul>\n";
  const Value& ch = r.at("champion");
  const Value& test = r.at("test");
  std::string champion_id;
  if (!ch.is_null()) {
    champion_id = ch.at("trial_id").as_string();
    h += fmt::format("<h2>Champion{}: {}</h2><p>{}<br>lineage: {}</p>\n",
                     ch.at("final").as_bool() ? "" : " so far", html_escape(champion_id),
                     html_escape(ch.at("genome_summary").as_string()),
                     html_escape(joined(ch.at("lineage"), " → ")));
    h += "<table><tr><th></th><th>trial</th><th>validation NLL</th><th>score</th><th>validation "
         "PPL</th><th>test NLL</th><th>test PPL</th></tr>";
    auto row = [&](const char* role, const Value& t) {
      const Value* tt = test.is_object() ? test.find(role) : nullptr;
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class=n>{} ± {}</td><td class=n>{}</td><td "
          "class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
          role, html_escape(t.at("trial_id").as_string()), num(t.at("mean_nll")),
          num(t.at("std_nll")), num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
          tt ? num(tt->at("mean_nll")) : "—", tt ? num(tt->at("perplexity"), "{:.2f}") : "—");
    };
    row("baseline", trials.at(size_t{0}));
    row("champion", ch);
    h += "</table>\n";
  }
  h += "<h2>Search</h2>\n" + svg_trial_scatter(r);
  // Champion lineage: the champion's score after each generation, and the best child of each
  // generation.
  std::vector<double> champ, best_child;
  bool all_children = true;
  if (!trials.as_array().empty() && !trials.at(size_t{0}).at("score").is_null()) {
    champ.push_back(trials.at(size_t{0}).at("score").as_double());
    best_child.push_back(champ.back());
    for (const Value& round : r.at("rounds").as_array()) {
      if (round.at("champion_score").is_null()) continue;
      champ.push_back(round.at("champion_score").as_double());
      const Array& obs = round.at("observations").as_array();
      if (!obs.empty() && !obs[0].at("score").is_null())
        best_child.push_back(obs[0].at("score").as_double());
      else
        all_children = false;
    }
  }
  if (champ.size() > 1) {
    std::vector<Series> series;
    if (all_children) series.push_back({"best child of the generation", best_child, "#1f77b4"});
    series.push_back({"champion after the generation", champ,
                      "#d62728"});  // drawn last: on top where they coincide
    h += svg_line_chart("Champion lineage: score after each generation", "generation",
                        "score (nats)", series);
  }
  std::vector<std::string> labels;
  std::vector<double> values;
  const Value& base_nll = trials.as_array().empty() ? Value() : trials.at(size_t{0}).at("mean_nll");
  if (!base_nll.is_null()) {
    for (const Value& t : trials.as_array()) {
      labels.push_back(t.at("trial_id").as_string());
      values.push_back(
          t.at("mean_nll").is_null() ? NAN : t.at("mean_nll").as_double() - base_nll.as_double());
    }
    h += svg_bar_chart("Mean validation NLL minus the baseline's (negative = better; n/a = failed)",
                       labels, values, "Δ NLL (nats)");
  }
  h += "<h2>Rounds</h2>\n";
  for (const Value& round : r.at("rounds").as_array()) {
    h += fmt::format("<h3>Generation {} (parent {})</h3><ul>", round.at("generation").as_int(),
                     html_escape(round.at("parent").as_string()));
    for (const Value& p : round.at("proposals").as_array())
      h += fmt::format(
          "<li>{} {}: {}{}</li>", html_escape(p.at("trial_id").as_string()),
          html_escape(p.at("origin").as_string()), html_escape(joined(p.at("changes"), ", ")),
          p.at("note").is_null() ? "" : " <i>(" + html_escape(p.at("note").as_string()) + ")</i>");
    for (const Value& s : round.at("skipped").as_array())
      h += "<li>skipped " + html_escape(s.as_string()) + "</li>";
    h += fmt::format("</ul><p>{}</p>\n", html_escape(round.at("decision").is_null()
                                                         ? std::string("(running)")
                                                         : round.at("decision").as_string()));
  }
  h += "<h2>All "
       "trials</h2>\n<table><tr><th>trial</th><th>gen</th><th>origin</th><th>changes</"
       "th><th>genome</th><th>mean NLL</th><th>std</th>"
       "<th>score</th><th>PPL</th><th>params</th><th>s</th><th>status</th></tr>\n";
  for (const Value& t : trials.as_array()) {
    const std::string id = t.at("trial_id").as_string();
    const bool failed = t.at("status").as_string() != "completed";
    h += fmt::format(
        "<tr class=\"{}\"><td><span style=\"color:{}\">●</span> {}</td><td "
        "class=n>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td>"
        "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td "
        "class=n>{:.1f}</td><td>{}</td></tr>\n",
        id == champion_id ? "champion"
        : failed          ? "failed"
                          : "",
        generation_color(t.at("generation").as_int()), html_escape(id), t.at("generation").as_int(),
        html_escape(t.at("origin").as_string()), html_escape(joined(t.at("changes"), ", ")),
        html_escape(t.at("genome_summary").as_string()), num(t.at("mean_nll")),
        num(t.at("std_nll")), num(t.at("score")), num(t.at("perplexity"), "{:.2f}"),
        t.at("parameters").is_null() ? "—" : std::to_string(t.at("parameters").as_int()),
        t.at("duration_seconds").as_double(),
        html_escape(t.at("status").as_string() +
                    (t.at("error").is_null() ? "" : ": " + t.at("error").as_string())));
  }
  h += "</table>\n<h2>Protocol</h2><ul>";
  for (const char* k : {"score", "validation", "test", "training", "proposals"})
    h += fmt::format("<li>{}: {}</li>", k, html_escape(r.at("protocol").at(k).as_string()));
  h += "</ul>\n<h2>result.json</h2><details><summary>show</summary><pre>" +
       html_escape(json::dump(r, 2)) + "</pre></details>\n</body></html>\n";
  return h;
}

}  // namespace dg
