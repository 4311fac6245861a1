// The evolutionary search loop (EvolveSearch in search.h): the baseline, the generations and
// their selection, resume, the ablation and the test evaluation. The result.json it writes after
// every trial is built in search_result.cpp.
#include "tools/attnres/evolve/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "tools/attnres/evolve/ablation.h"
#include "tools/attnres/evolve/directions.h"
#include "tools/attnres/evolve/proposals.h"
#include "tools/attnres/evolve/records.h"
#include "tools/attnres/stats.h"
#include "train/stop.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

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
  c.emplace_back("mutation", o.mutation);
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
  // Runs recorded before --mutation existed mutated one or two genes.
  const json::Value* mutation = c.find("mutation");
  o.mutation = mutation ? mutation->as_string() : "multi";
  o.eval_windows = c.at("eval_windows").as_int();
  o.vocab = c.at("vocab").as_int();
  o.baseline = genome_from_json(c.at("baseline"));
  return o;
}

// ---- setting up

EvolveSearch::EvolveSearch(const EvolveOptions& o, const TrialTrainer& trainer, const Value* resume)
    : o_(o), trainer_(trainer), started_(std::chrono::steady_clock::now()) {
  check_options();
  mutation_ = parse_mutation_kind(o.mutation);
  if (o.write_files && o.run_dir.empty()) throw std::invalid_argument("evolve: no run directory");
  genome_model_config(o.baseline, o.vocab);  // the baseline must be buildable
  for (int64_t i = 0; i < o.trial_seeds; ++i) seeds_.push_back(o.seed + static_cast<uint64_t>(i));
  plan_ = plan_direction(o.direction, o.baseline);
  std::string dir = o.run_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  run_id_ = dir.empty() ? "in-memory" : dir.substr(dir.find_last_of('/') + 1);
  if (resume) load_resume(*resume);
}

void EvolveSearch::check_options() const {
  const EvolveOptions& o = o_;
  if (o.model != "micro-llm")
    throw std::invalid_argument(
        fmt::format("--model: only micro-llm is supported, got '{}'", o.model));
  if (o.dataset.empty() || o.dataset == "tiny-shakespeare")
    throw std::invalid_argument(fmt::format(
        "--dataset: wikitext-2 or your own text (a file or folder), got '{}'", o.dataset));
  if (o.generations < 0)
    throw std::invalid_argument(fmt::format("--generations: must be >= 0, got {}", o.generations));
  if (o.population < 1)
    throw std::invalid_argument(fmt::format("--population: must be >= 1, got {}", o.population));
  if (o.trial_seeds < 1)
    throw std::invalid_argument(fmt::format("--trial-seeds: must be >= 1, got {}", o.trial_seeds));
  if (!(o.confidence_z >= 0) || !std::isfinite(o.confidence_z))
    throw std::invalid_argument(
        fmt::format("--confidence-z: must be finite and >= 0, got {}", o.confidence_z));
  if (o.eval_windows < 0)
    throw std::invalid_argument(
        fmt::format("--eval-windows: must be >= 0, got {}", o.eval_windows));
}

void EvolveSearch::say(const std::string& s) const {
  if (o_.on_message) o_.on_message(s);
}

void EvolveSearch::say_direction() const {
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

// ---- resume

void EvolveSearch::load_resume(const Value& r) {
  // Every setting must be the recorded one, except that more generations may be asked for: the
  // recorded generations are proposed again identically and the new ones follow them.
  Value recorded = evolve_config_json(evolve_options_from_config(r.at("config"))),
        mine = evolve_config_json(o_);
  const int64_t recorded_generations = recorded.at("generations").as_int();
  if (o_.generations < recorded_generations)
    throw std::invalid_argument(fmt::format(
        "--resume: --generations {} is fewer than the {} the run was started with; a resume "
        "can only add generations",
        o_.generations, recorded_generations));
  recorded["generations"] = o_.generations;
  if (!(recorded == mine))
    throw std::invalid_argument(
        "--resume: the search settings differ from the recorded run's config; resume with the "
        "recorded settings (only --generations may grow)");
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
  if (const Value* ab = r.find("ablation"); ab && ab->is_object())
    for (const Value& v : ab->at("variants").as_array()) {
      TrialRecord rec = trial_from_json(v.at("trial"), o_.confidence_z);
      recorded_[rec.id] = rec;
    }
  if (const Value* prev = r.find("runtime")) {
    previous_wall_ = prev->at("wall_seconds").as_double();
    // runtime.sessions counts the invocations of the program (a key kept results hold)
    invocations_ = prev->at("sessions").as_int() + 1;
    if (const Value* th = prev->find("threads"); th && th->as_int() != o_.threads)
      say(
          fmt::format("warning: the run used {} thread(s), this process {}; results may differ "
                      "in the last bits",
                      th->as_int(), o_.threads));
  }
  load_resumed_tests(r);
}

// The test results of a complete recorded run, reused when the champion is the same.
void EvolveSearch::load_resumed_tests(const Value& r) {
  const Value* tests = r.find("test");
  if (!tests || !tests->is_object() || r.at("status").as_string() != "complete") return;
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

// ---- the search

EvolveOutput EvolveSearch::run() {
  say_direction();
  if (o_.baseline.run.training.steps < kArmsDifferSteps)
    say(fmt::format(
        "note: {} training steps: block_attnres and rd_attnres train almost alike for the first "
        "hundreds of steps (identical initialisation), so trials this short cannot tell them "
        "apart; use --steps {} or more to compare the two",
        o_.baseline.run.training.steps, kArmsDifferSteps));
  run_baseline();
  size_t champion = 0;
  for (int64_t g = 1; g <= o_.generations; ++g) {
    run_generation(g, champion);
    champion = select_champion(g, champion);
    write("running");
  }
  champion_ = static_cast<int64_t>(champion);
  run_ablation(champion);
  run_tests(champion);
  write("complete");
  EvolveOutput out;
  out.result = build("complete");
  out.summary = summary(out.result);
  return out;
}

// Generation 0: the baseline. A failed baseline ends the search.
void EvolveSearch::run_baseline() {
  TrialRecord base;
  base.id = "g0-t0";
  base.origin = "baseline";
  base.genome = o_.baseline;
  seen_.push_back(genome_key(o_.baseline));
  run_trial(std::move(base));
  if (!trials_[0].ok()) {
    write("failed");
    throw std::runtime_error(fmt::format(
        "the baseline trial g0-t0 failed ({}); there is nothing to evolve from", trials_[0].error));
  }
}

void EvolveSearch::run_generation(int64_t g, size_t champion) {
  const int64_t runner = runner_up(champion);
  RoundRecord round;
  round.generation = g;
  round.parent = trials_[champion].id;
  if (runner >= 0) round.runner_up = trials_[runner].id;
  const Genome parent_genome = trials_[champion].genome;
  GenerationPlan gp =
      propose_generation(g, o_.population, o_.seed, plan_.space, trials_[champion].id,
                         parent_genome, runner >= 0 ? trials_[runner].id : "",
                         runner >= 0 ? &trials_[runner].genome : nullptr, seen_, mutation_);
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
}

// Selection: a strictly lower score replaces the parent; ties keep it. Records the decision in
// the generation's round and returns the champion.
size_t EvolveSearch::select_champion(int64_t g, size_t champion) {
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
        signed_delta(c.score.mean - parent.score.mean), p.n, signed_delta(p.mean), p.lower, p.n);
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
  return champion;
}

// Trains a trial on every seed (or takes it from the resumed record), scores it, records it.
void EvolveSearch::run_trial(TrialRecord t) {
  const bool recorded = recorded_.count(t.id) > 0;
  trials_.push_back(train_trial(std::move(t)));
  if (!recorded) write("running");
}

// A trial trained on every seed and scored (or its record from the resumed run).
TrialRecord EvolveSearch::train_trial(TrialRecord t) {
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
    return t;
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
  } catch (const Interrupted&) {
    throw;  // a stop request ends the search (the finished trials are written), not the trial
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
                    perplexity_of(t.score.mean), t.duration));
  else
    say(fmt::format("  {}: FAILED: {} ({:.1f} s); the search goes on", t.id, t.error, t.duration));
  return t;
}

// ---- the ablation: which of the champion's changes made its gain

void EvolveSearch::run_ablation(size_t champion) {
  if (champion == 0) return;
  const TrialRecord& c = trials_[champion];
  const TrialRecord* parent = find_trial(c.parents.empty() ? "" : c.parents[0]);
  if (!parent || !parent->ok()) return;
  ablation_.parent = parent->id;
  ablation_.champion = c.id;
  ablation_.changes = 0;
  std::vector<std::string> changed;
  for (Gene g : kGenes)
    if (gene_value(parent->genome, g) != gene_value(c.genome, g)) {
      ++ablation_.changes;
      changed.push_back(gene_name(g));
    }
  ablation_.genes_changed = changed;
  ablation_.run = true;
  const std::vector<AblationVariant> variants = ablation_variants(parent->genome, c.genome, c.id);
  if (!variants.empty())
    say(fmt::format("ablation: {} changed {} genes against its parent {}; each alone:", c.id,
                    ablation_.changes, parent->id));
  for (const AblationVariant& v : variants) {
    ablation_.variants.push_back(
        ablation_trial(v, c, *parent, static_cast<int64_t>(variants.size())));
    ablation_.genes.push_back(gene_name(v.gene));
    write("running");
  }
  std::vector<double> means;
  for (const TrialRecord& t : ablation_.variants) means.push_back(t.ok() ? t.score.mean : NAN);
  ablation_.verdict =
      judge_ablation(parent->score.mean, c.score.mean, means, ablation_.genes, ablation_.changes);
  say("attribution: " + ablation_.verdict.text);
}

// One changed gene applied alone to the parent: trained on the trial seeds, or the record of a
// trial of the search with that genome. `variants` is how many the ablation trains in all.
TrialRecord EvolveSearch::ablation_trial(const AblationVariant& v, const TrialRecord& c,
                                         const TrialRecord& parent, int64_t variants) {
  TrialRecord t;
  t.id = v.trial_id;
  t.generation = c.generation;
  t.origin = "ablation";
  t.parents = {parent.id};
  t.changes = {v.change};
  t.genome = v.genome;
  if (const TrialRecord* same = find_genome(v.genome)) {  // trained in the search already
    const std::string id = t.id;
    t = *same;
    t.id = id;
    t.origin = "ablation";
    t.parents = {parent.id};
    t.changes = {v.change};
    t.note = "the same genome as " + same->id + ", trained on the same seeds: its record";
    for (SeedMetrics& m : t.seeds) m.evaluate_test = nullptr;
    say(fmt::format("{}: the same genome as {} (reused)", t.id, same->id));
    return t;
  }
  if (o_.on_trial)
    o_.on_trial(t.id, static_cast<int64_t>(trials_.size() + ablation_.variants.size()),
                planned_trials() + variants);
  t = train_trial(std::move(t));
  for (SeedMetrics& m : t.seeds) m.evaluate_test = nullptr;
  return t;
}

// ---- the test split, once: the baseline and the champion

void EvolveSearch::run_tests(size_t champion) {
  if (resumed_tests_.size() == (champion == 0 ? 1u : 2u) &&
      resumed_tests_[0].trial_id == trials_[0].id &&
      resumed_tests_.back().trial_id == trials_[champion].id) {
    tests_ = resumed_tests_;
    say("test results: recorded earlier (resume)");
    return;
  }
  tests_.push_back(run_test("baseline", trials_[0]));
  if (champion != 0) tests_.push_back(run_test("champion", trials_[champion]));
}

// The test split, once per role: the trained weights kept in memory are evaluated on the test
// windows; a seed without them (a trial of an earlier process) is re-trained deterministically
// (same genome, seed and options) and checked against its recorded training losses.
TestRecord EvolveSearch::run_test(const std::string& role, const TrialRecord& t) {
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
        m.perplexity = perplexity_of(m.nll);
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
  } catch (const Interrupted&) {
    throw;
  } catch (const std::exception& e) {
    r.status = "failed";
    r.error = e.what();
    say(fmt::format("  test of {} FAILED: {}", t.id, r.error));
  }
  return r;
}

// ---- looking up trials

const TrialRecord* EvolveSearch::find_trial(const std::string& id) const {
  for (const TrialRecord& t : trials_)
    if (t.id == id) return &t;
  return nullptr;
}

const TrialRecord* EvolveSearch::find_genome(const Genome& g) const {
  for (const TrialRecord& t : trials_)
    if (t.ok() && t.genome == g) return &t;
  return nullptr;
}

int64_t EvolveSearch::planned_trials() const { return 1 + o_.generations * o_.population + 2; }

// The best completed trial other than the champion (lower score; earlier trial on ties), or -1.
int64_t EvolveSearch::runner_up(size_t champion) const {
  int64_t best = -1;
  for (size_t i = 0; i < trials_.size(); ++i) {
    if (i == champion || !trials_[i].ok() || trials_[i].genome == trials_[champion].genome)
      continue;
    if (best < 0 || trials_[i].score.score < trials_[best].score.score)
      best = static_cast<int64_t>(i);
  }
  return best;
}

size_t EvolveSearch::current_champion() const {
  if (champion_ >= 0) return static_cast<size_t>(champion_);
  for (auto it = rounds_.rbegin(); it != rounds_.rend(); ++it)
    if (!it->champion.empty())
      for (size_t i = 0; i < trials_.size(); ++i)
        if (trials_[i].id == it->champion) return i;
  return 0;
}

std::vector<std::string> EvolveSearch::lineage(size_t champion) const {
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

EvolveOutput run_evolution(const EvolveOptions& options, const TrialTrainer& trainer,
                           const Value* resume) {
  EvolveSearch search(options, trainer, resume);
  return search.run();
}

}  // namespace dg
