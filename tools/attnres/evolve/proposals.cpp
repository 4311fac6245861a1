// Mutation, crossover and the proposals of one generation (see proposals.h).
#include "tools/attnres/evolve/proposals.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace dg {

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

MutationKind parse_mutation_kind(const std::string& text) {
  if (text == "single") return MutationKind::single;
  if (text == "multi") return MutationKind::multi;
  throw std::invalid_argument(fmt::format("--mutation: expected single or multi, got '{}'", text));
}
const char* mutation_kind_name(MutationKind kind) {
  return kind == MutationKind::single ? "single" : "multi";
}

Proposal mutate(const Genome& parent, const SearchSpace& space, ProposalRng& rng,
                MutationKind kind) {
  Proposal p{parent, "mutation", {}};
  const int genes_to_change = kind == MutationKind::single ? 1 : rng.uniform() < 0.3 ? 2 : 1;
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
                                  const Genome* runner_up, std::vector<std::string>& seen_keys,
                                  MutationKind kind) {
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
      Proposal p = cross ? crossover(champion, *runner_up, runner_up_id, rng)
                         : mutate(champion, space, rng, kind);
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

}  // namespace dg
