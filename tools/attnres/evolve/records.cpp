// The search's records as result.json holds them, and back (see records.h).
#include "tools/attnres/evolve/records.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/attnres/stats.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

Value seed_json(const SeedMetrics& m) {
  Object o;
  o.emplace_back("seed", static_cast<int64_t>(m.seed));
  o.emplace_back("nll", m.nll);
  o.emplace_back("perplexity", m.perplexity);
  o.emplace_back("initial_loss", m.initial_loss);
  o.emplace_back("final_loss", m.final_loss);
  o.emplace_back("parameters", m.parameters);
  o.emplace_back("seconds", m.seconds);
  if (!m.losses.empty()) o.emplace_back("losses", Value(Array(m.losses.begin(), m.losses.end())));
  if (!m.routes_qk.empty()) {
    auto matrix = [](const std::vector<std::vector<double>>& rows) {
      Array a;
      for (const auto& row : rows) a.emplace_back(Array(row.begin(), row.end()));
      return Value(std::move(a));
    };
    Object routes;
    routes.emplace_back("mean_alpha_qk", matrix(m.routes_qk));
    routes.emplace_back("mean_alpha_v", matrix(m.routes_v));
    o.emplace_back("routes_validation", Value(std::move(routes)));
  }
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
  if (const Value* losses = v.find("losses"))
    for (const Value& l : losses->as_array()) m.losses.push_back(l.as_double());
  if (const Value* routes = v.find("routes_validation")) {
    auto matrix = [](const Value& rows) {
      std::vector<std::vector<double>> out;
      for (const Value& row : rows.as_array()) {
        out.emplace_back();
        for (const Value& x : row.as_array()) out.back().push_back(x.as_double());
      }
      return out;
    };
    m.routes_qk = matrix(routes->at("mean_alpha_qk"));
    m.routes_v = matrix(routes->at("mean_alpha_v"));
  }
  return m;
}
Value strings_json(const std::vector<std::string>& v) { return Value(Array(v.begin(), v.end())); }
std::vector<std::string> strings_from(const Value& v) {
  std::vector<std::string> out;
  for (const Value& s : v.as_array()) out.push_back(s.as_string());
  return out;
}
double perplexity_of(double nll) { return std::exp(std::min(nll, 20.0)); }
std::string signed_delta(double d) {
  return std::abs(d) >= 1e-3 || d == 0 ? fmt::format("{:+.4f}", d) : fmt::format("{:+.2e}", d);
}

Value trial_json(const TrialRecord& t) {
  Object o;
  o.emplace_back("trial_id", t.id);
  o.emplace_back("generation", t.generation);
  o.emplace_back("slot", t.slot);
  o.emplace_back("origin", t.origin);
  o.emplace_back("parents", strings_json(t.parents));
  o.emplace_back("changes", strings_json(t.changes));
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
    o.emplace_back("perplexity", perplexity_of(t.score.mean));
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

Value round_json(const RoundRecord& r, const std::vector<TrialRecord>& trials) {
  auto find = [&](const std::string& id) -> const TrialRecord* {
    for (const TrialRecord& t : trials)
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
    p.emplace_back("parents", strings_json(t->parents));
    p.emplace_back("changes", strings_json(t->changes));
    p.emplace_back("draws", t->draws);
    p.emplace_back("note", t->note.empty() ? Value() : Value(t->note));
    proposals.emplace_back(std::move(p));
  }
  o.emplace_back("proposals", Value(std::move(proposals)));
  o.emplace_back("skipped", strings_json(r.skipped));
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

Value test_json(const TestRecord& r) {
  Object o;
  o.emplace_back("trial_id", r.trial_id);
  Array seeds;
  std::vector<double> nll;
  for (size_t i = 0; i < r.seeds.size(); ++i) {
    SeedMetrics m = r.seeds[i];
    m.losses.clear();  // the trial's record holds the curves and routes
    m.routes_qk.clear();
    m.routes_v.clear();
    Value s = seed_json(m);
    s["weights"] = r.kept[i] ? "kept in memory" : "re-trained deterministically";
    s["reproduces_training"] = static_cast<bool>(r.reproduced[i]);
    seeds.push_back(std::move(s));
    nll.push_back(r.seeds[i].nll);
  }
  o.emplace_back("seeds", Value(std::move(seeds)));
  const bool ok = r.status == "completed" && !nll.empty();
  o.emplace_back("mean_nll", ok ? Value(mean_of(nll)) : Value());
  o.emplace_back("std_nll", ok ? Value(sample_std(nll)) : Value());
  o.emplace_back("perplexity", ok ? Value(perplexity_of(mean_of(nll))) : Value());
  o.emplace_back("status", r.status);
  o.emplace_back("error", r.error.empty() ? Value() : Value(r.error));
  return Value(std::move(o));
}

}  // namespace dg
