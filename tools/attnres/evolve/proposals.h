// Proposals of `depthgrad evolve`: children of the champion by mutation (one or two genes drawn
// from the search space) and crossover (with the runner-up), from a small deterministic RNG, so a
// generation's proposals depend only on the seed and the search so far. It does not train or
// score anything (search.h does).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/attnres/evolve/directions.h"
#include "tools/attnres/evolve/genome.h"

namespace dg {

// A small deterministic generator (SplitMix64) for proposals: the same seed gives the same
// stream on every machine and thread count.
class ProposalRng {
 public:
  explicit ProposalRng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  // An index drawn with probability ∝ weights[i] (weights >= 0, some > 0).
  size_t pick(const std::vector<double>& weights);

 private:
  uint64_t state_;
};

struct Proposal {
  Genome genome;
  std::string origin;                // mutation | crossover
  std::vector<std::string> changes;  // "dim: 64 → 96" (crossover: "dim: 64 → 96 (from g1-t2)")
};
// How many genes a mutation changes: single = exactly one (every gain is attributable to one
// gene); multi = one, or two with probability 0.3 (reaches two-gene interactions in one step).
enum class MutationKind { single, multi };
MutationKind parse_mutation_kind(const std::string& text);  // "single" | "multi"; throws naming it
const char* mutation_kind_name(MutationKind kind);
// The genes of `parent` a mutation changes (see MutationKind), genes and values drawn from the
// space; the result may be invalid or already seen (the caller re-draws).
Proposal mutate(const Genome& parent, const SearchSpace& space, ProposalRng& rng,
                MutationKind kind = MutationKind::multi);
// Each gene from `a` or `b` with probability ½; never equal to `a` when the two differ.
Proposal crossover(const Genome& a, const Genome& b, const std::string& b_id, ProposalRng& rng);

struct ProposedTrial {
  std::string trial_id;  // g<generation>-t<slot>
  int64_t slot = 0;
  Proposal proposal;
  std::vector<std::string> parents;  // champion first (crossover: and the runner-up)
  int64_t draws = 0;                 // draws needed to reach a new, valid genome
  std::string note;                  // e.g. why the crossover slot holds a mutation
};
struct GenerationPlan {
  std::vector<ProposedTrial> trials;
  std::vector<std::string> skipped;  // slots for which no new genome was found in kMaxDraws draws
};
constexpr int64_t kMaxDraws = 64;
// The children of one generation: slot 1..population, each a mutation of the champion, except the
// last slot, which is a crossover of champion and runner-up when a runner-up exists and
// population >= 2. A genome already in `seen` (or proposed earlier in this generation) or not
// buildable is re-drawn, at most kMaxDraws times; then the slot is skipped. The RNG is seeded from
// (seed, generation), so a generation's proposals depend only on the seed and the search so far.
GenerationPlan propose_generation(int64_t generation, int64_t population, uint64_t seed,
                                  const SearchSpace& space, const std::string& champion_id,
                                  const Genome& champion, const std::string& runner_up_id,
                                  const Genome* runner_up, std::vector<std::string>& seen_keys,
                                  MutationKind kind = MutationKind::multi);

}  // namespace dg
