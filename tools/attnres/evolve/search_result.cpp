// What EvolveSearch (search.h) writes: the result.json document of the search so far (its
// settings, protocol, trials, rounds, champion, test results, ablation and runtime), the files
// rendered from it, and the summary the CLI prints at the end. It runs no trial.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "tools/attnres/evolve/records.h"
#include "tools/attnres/evolve/render.h"
#include "tools/attnres/evolve/search.h"
#include "train/io/files.h"
#include "train/io/run_record.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

Value EvolveSearch::build(const std::string& status) const {
  Value result;
  result["schema_version"] = 1;
  result["command"] = "evolve";
  result["run_id"] = run_id_;
  result["status"] = status;
  result["config"] = evolve_config_json(o_);
  result["protocol"] = protocol_json();
  result["direction"] = direction_plan_json(plan_);
  result["dataset"] = o_.dataset_info;
  Array trials;
  for (const TrialRecord& t : trials_) trials.push_back(trial_json(t));
  result["trials"] = Value(std::move(trials));
  Array rounds;
  for (const RoundRecord& r : rounds_) rounds.push_back(round_json(r, trials_));
  result["rounds"] = Value(std::move(rounds));
  result["champion"] = champion_json(status);
  result["test"] = tests_json();
  result["ablation"] = ablation_json();
  result["runtime"] = runtime_json();
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

// How the search trains, scores, proposes, tests and attributes, in words and numbers.
Value EvolveSearch::protocol_json() const {
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
          ? fmt::format("the first {} non-overlapping windows of {} tokens of the validation split",
                        o_.eval_windows, o_.baseline.run.model.seq_len)
          : std::string("every non-overlapping window of the validation split");
  protocol["test"] =
      "evaluated once, after the search, for the baseline and the champion only, on the same "
      "number of windows from the "
      "test split's start; the trained weights of the baseline and the current champion are kept "
      "in memory for it (nothing "
      "is re-trained); a trial trained by an earlier invocation of a resumed run is re-trained "
      "deterministically (same genome, "
      "seeds, options and data order) and its training losses are checked against the recorded "
      "ones (reproduces_training)";
  protocol["training"] =
      "dg::Trainer: identical init, AdamW (β 0.9/0.999, weight decay 0.01 on matrices only), "
      "clip 1.0, cosine = 5% "
      "warmup then cosine to 10% of the peak; batches are the reference's random windows of the "
      "full train split";
  protocol["proposals"] = fmt::format(
      "per generation: mutations of the champion ({}) and, once a runner-up exists, a crossover "
      "of champion and runner-up in the last slot; seen or unbuildable genomes are re-drawn up "
      "to {} times, never re-trained",
      mutation_ == MutationKind::single
          ? "--mutation single: exactly one gene, so each mutation's gain is attributable"
          : "--mutation multi: 1 gene, or 2 with probability 0.3",
      kMaxDraws);
  protocol["budget"] = fmt::format(
      "with identical initialisation block_attnres and rd_attnres start as the same function and "
      "train almost alike at first (at d64 L4 their per-step losses differ by < 1e-4 until step "
      "60-180); after 200 steps their validation NLLs differ by ~2e-5 with no consistent sign, "
      "after {} steps rd is lower on every seed measured; this run's baseline trains {} steps{}",
      kArmsDifferSteps, o_.baseline.run.training.steps,
      o_.baseline.run.training.steps < kArmsDifferSteps
          ? ", too few to tell the two arms apart: a mode change between them is noise here"
          : "");
  protocol["ablation"] =
      "after the search, when the champion differs from its parent in more than one gene, each "
      "changed gene is applied alone to the parent and trained on the same seeds; the gain is "
      "attributed to a gene when that gene alone gives at least half of it and no other does, "
      "and is reported as confounded otherwise";
  return protocol;
}

// The current champion (null until the baseline completed): its genome, scores, lineage and
// changes from the baseline; final once the search is complete.
Value EvolveSearch::champion_json(const std::string& status) const {
  if (trials_.empty() || !trials_[0].ok()) return Value();
  const size_t c = current_champion();
  const TrialRecord& t = trials_[c];
  Value ch;
  ch["trial_id"] = t.id;
  ch["genome"] = genome_to_json(t.genome);
  ch["genome_summary"] = genome_summary(t.genome);
  ch["mean_nll"] = t.score.mean;
  ch["std_nll"] = t.score.std;
  ch["score"] = t.score.score;
  ch["perplexity"] = perplexity_of(t.score.mean);
  ch["lineage"] = strings_json(lineage(c));
  std::vector<std::string> diff;
  for (Gene g : kGenes)
    if (gene_value(trials_[0].genome, g) != gene_value(t.genome, g))
      diff.push_back(fmt::format("{}: {} → {}", gene_name(g), gene_value(trials_[0].genome, g),
                                 gene_value(t.genome, g)));
  ch["changes_from_baseline"] = strings_json(diff);
  ch["final"] = status == "complete";
  return ch;
}

Value EvolveSearch::tests_json() const {
  Value test;
  if (!tests_.empty()) {
    test["split"] = "test";
    test["baseline"] = test_json(tests_[0]);
    test["champion"] = tests_.size() > 1 ? test_json(tests_[1]) : test_json(tests_[0]);
    test["champion_is_baseline"] = tests_.size() == 1;
  }
  return test;
}

Value EvolveSearch::ablation_json() const {
  if (!ablation_.run) return Value();
  const TrialRecord* parent = find_trial(ablation_.parent);
  Object o;
  o.emplace_back("parent", ablation_.parent);
  o.emplace_back("champion", ablation_.champion);
  o.emplace_back("genes_changed", strings_json(ablation_.genes_changed));
  Array variants;
  for (size_t i = 0; i < ablation_.variants.size(); ++i) {
    const TrialRecord& t = ablation_.variants[i];
    Object v;
    v.emplace_back("gene", ablation_.genes[i]);
    v.emplace_back("change", t.changes.empty() ? std::string() : t.changes[0]);
    const bool judged =
        i < ablation_.verdict.gains_alone.size() && std::isfinite(ablation_.verdict.gains_alone[i]);
    v.emplace_back("nll_change_alone", judged ? Value(-ablation_.verdict.gains_alone[i]) : Value());
    if (t.ok() && parent) {
      const Paired p = paired_vs(t, *parent);
      v.emplace_back("paired_mean_difference_vs_parent", p.mean);
      v.emplace_back("seeds_lower_than_parent", p.lower);
    }
    v.emplace_back("trial", trial_json(t));
    variants.emplace_back(std::move(v));
  }
  o.emplace_back("variants", Value(std::move(variants)));
  const bool done =
      ablation_.variants.size() == ablation_.genes.size() && !ablation_.verdict.text.empty();
  o.emplace_back("nll_change_together", done ? Value(-ablation_.verdict.joint_gain) : Value());
  o.emplace_back("attributed_to",
                 done && ablation_.verdict.attributed
                     ? Value(ablation_.verdict.carriers.empty() ? ablation_.genes_changed[0]
                                                                : ablation_.verdict.carriers[0])
                     : Value());
  o.emplace_back("confounded", done && ablation_.verdict.confounded);
  o.emplace_back("verdict", done ? Value(ablation_.verdict.text) : Value());
  return Value(std::move(o));
}

// Wall time over every invocation of the run, the invocations and this one's threads.
Value EvolveSearch::runtime_json() const {
  Value rt;
  rt["wall_seconds"] =
      previous_wall_ +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  rt["sessions"] = invocations_;
  rt["threads"] = o_.threads;
  return rt;
}

void EvolveSearch::write(const std::string& status) const {
  if (!o_.write_files) return;
  make_dirs(o_.run_dir);
  Value result = build(status);
  write_file_atomic(o_.run_dir + "/result.json", json::dump(result, 2) + "\n");
  write_file_atomic(o_.run_dir + "/report.md", render_evolve_markdown(result));
  write_file_atomic(o_.run_dir + "/index.html", render_evolve_html(result));
}

std::string EvolveSearch::summary(const Value& result) const {
  const Value& ch = result.at("champion");
  const TrialRecord& base = trials_[0];
  std::string s;
  s += fmt::format("Champion: {} ({})\n", ch.at("trial_id").as_string(),
                   ch.at("genome_summary").as_string());
  std::vector<std::string> diff = strings_from(ch.at("changes_from_baseline"));
  s += fmt::format("  changes from the baseline: {}\n",
                   diff.empty() ? std::string("none") : fmt::format("{}", fmt::join(diff, ", ")));
  s += fmt::format("  lineage: {}\n", fmt::join(strings_from(ch.at("lineage")), " → "));
  if (const Value& ab = result.at("ablation"); ab.is_object() && !ab.at("verdict").is_null())
    s += fmt::format("  attribution against its parent {}: {}\n", ab.at("parent").as_string(),
                     ab.at("verdict").as_string());
  s += fmt::format(
      "Validation NLL ({}, mean ± std over the trial seeds): champion {:.4f} ± {:.4f} (score "
      "{:.4f}, perplexity {:.2f}); baseline {:.4f} ± {:.4f} (score {:.4f}, perplexity {:.2f})\n",
      o_.eval_windows > 0 ? fmt::format("{} windows", o_.eval_windows) : "every window",
      ch.at("mean_nll").as_double(), ch.at("std_nll").as_double(), ch.at("score").as_double(),
      ch.at("perplexity").as_double(), base.score.mean, base.score.std, base.score.score,
      perplexity_of(base.score.mean));
  const Value& test = result.at("test");
  auto test_line = [&](const char* role) {
    const Value& t = test.at(role);
    if (t.at("status").as_string() != "completed")
      return fmt::format("{} {} failed ({})", role, t.at("trial_id").as_string(),
                         t.at("error").as_string());
    return fmt::format("{} {} NLL {:.4f} (perplexity {:.2f})", role, t.at("trial_id").as_string(),
                       t.at("mean_nll").as_double(), t.at("perplexity").as_double());
  };
  s += fmt::format("Test ({}, once): {}; {}\n",
                   o_.eval_windows > 0 ? fmt::format("{} windows", o_.eval_windows) : "full split",
                   test_line("baseline"), test_line("champion"));
  if (!o_.run_dir.empty()) {
    s += fmt::format("Report: {}/report.md\n", o_.run_dir);
    s += fmt::format("Dashboard: {}/index.html\n", o_.run_dir);
  }
  return s;
}

}  // namespace dg
