// The reproduction's outputs: each arm as JSON, the paired statistics over seeds, the parity
// reference's recorded numbers, result.json, the printed comparison table and metrics.json, and
// the files written at the end. It does not train or read data (reproduce.cpp and
// reproduce_data.cpp do).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/attnres/report.h"
#include "tools/attnres/reproduce_internal.h"
#include "tools/attnres/stats.h"
#include "train/io/files.h"
#include "train/io/run_record.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

namespace {

Value doubles(const std::vector<double>& v) {
  Array a;
  for (double x : v) a.emplace_back(x);
  return Value(std::move(a));
}

Value matrix(const std::vector<std::vector<double>>& m) {
  Array a;
  for (const auto& row : m) a.push_back(doubles(row));
  return Value(std::move(a));
}

std::vector<double> to_doubles(const Value& v) {
  std::vector<double> out;
  for (const Value& x : v.as_array()) out.push_back(x.as_double());
  return out;
}

// p10, p50, p90, max of values (sorted copy).
Value distribution(std::vector<double> v) {
  Object d;
  if (v.empty()) return Value(std::move(d));
  std::sort(v.begin(), v.end());
  auto q = [&](double f) {
    return v[static_cast<size_t>(f * static_cast<double>(v.size() - 1) + 0.5)];
  };
  d.emplace_back("p10", q(0.10));
  d.emplace_back("p50", q(0.50));
  d.emplace_back("p90", q(0.90));
  d.emplace_back("max", v.back());
  d.emplace_back("mean", mean_of(v));
  d.emplace_back("tokens", static_cast<int64_t>(v.size()));
  return Value(std::move(d));
}

Value routes_json(const RouteStats& r) {
  Object o;
  o.emplace_back("mean_alpha_qk", matrix(r.mean_alpha_qk));
  o.emplace_back("mean_alpha_v", matrix(r.mean_alpha_v));
  o.emplace_back("js_per_layer", doubles(r.js_per_layer));
  o.emplace_back("js_mean_all_layers", r.js_reference);
  Array dist;
  for (const auto& per_token : r.js_per_token) dist.push_back(distribution(per_token));
  o.emplace_back("js_distribution_per_layer", Value(std::move(dist)));
  return Value(std::move(o));
}

double nll_of(const Value& arm) {
  if (const Value* full = arm.find("full_validation_lm_loss")) return full->as_double();
  return arm.at("lm_loss").as_double();
}

const double kReferenceLoss[2] = {5.7570388168, 5.7630852014};
const double kReferencePpl[2] = {316.40999236, 318.32892431};
const double kReferenceJs[2] = {0.0, 0.0048934901};

Value seeds_json(const std::vector<uint64_t>& seeds) {
  Array a;
  for (uint64_t s : seeds) a.emplace_back(static_cast<int64_t>(s));
  return Value(std::move(a));
}

Value dataset_json(const Corpus& corpus) {
  Value ds;
  ds["name"] = "WikiText-2";
  ds["train_tokens"] = static_cast<int64_t>(corpus.train.size());
  ds["validation_tokens"] = static_cast<int64_t>(corpus.validation.size());
  ds["test_tokens"] = static_cast<int64_t>(corpus.test.size());
  ds["narrative_tokens"] = static_cast<int64_t>(corpus.narrative.size());
  ds["train_tokens_total"] = corpus.train_total;
  ds["validation_tokens_total"] = corpus.validation_total;
  ds["vocab_size"] = corpus.tokenizer.vocab_size();
  ds["tokenizer"] = "tokenizer.json";
  ds["tokenizer_sha256"] = corpus.tokenizer_sha256;
  ds["benchmark_suite"] = "core (LM loss only; see omitted)";
  Value& sha = ds["sha256"];
  for (auto& [path, hash] : corpus.dataset_sha256) sha[path] = hash;
  return ds;
}

// The run config in the reference's "setup" vocabulary (§6.3), which reports and readers use.
Value setup_json(const ReproduceOptions& opt) {
  const RunConfig& c = opt.config;
  Value setup;
  setup["seeds"] = seeds_json(opt.seeds);
  setup["steps_per_variant"] = c.training.steps;
  setup["dimensions"] = c.model.dim;
  setup["layers"] = c.model.layers;
  setup["heads"] = c.model.heads;
  setup["kv_heads"] = c.model.kv_heads;
  setup["sequence_length"] = c.model.seq_len;
  setup["batch_size"] = c.training.batch;
  setup["expansion"] = c.model.expansion;
  setup["learning_rate"] = c.training.adamw.lr;
  setup["schedule"] = schedule_kind_name(c.training.schedule.kind);
  setup["warmup_steps"] = c.training.schedule.warmup_steps;
  setup["weight_decay"] = c.training.adamw.weight_decay;
  setup["weight_decay_applies_to"] = decay_policy_name(c.training.adamw.decay);
  setup["gradient_clip"] = c.training.clip;
  setup["init"] = init_scheme_name(c.training.init);
  setup["evaluation"] =
      c.data.eval_full
          ? fmt::format("reference ({} windows of {}) + full validation split", c.data.eval_windows,
                        c.model.seq_len)
          : fmt::format("reference ({} windows of {})", c.data.eval_windows, c.model.seq_len);
  setup["same_tokens_optimizer_and_budget"] = true;
  setup["evolve_architecture"] = opt.pair[1].name;
  setup["evolve_optimizer"] = "adamw";
  if (c.model.kv_heads != c.model.heads)
    setup["note"] =
        "kv_heads < heads: grouped-query attention is applied (the reference ignores kv_heads)";
  return setup;
}

// One arm over all seeds: the first seed's record with means (and sample std) over seeds.
Value arm_over_seeds(const std::vector<Value>& per_seed, const std::string& name,
                     const std::vector<uint64_t>& seeds) {
  std::vector<double> loss, ppl, js, full, full_ppl;
  for (const Value& s : per_seed) {
    const Value& arm = s.at(name);
    loss.push_back(arm.at("lm_loss").as_double());
    ppl.push_back(arm.at("perplexity").as_double());
    js.push_back(arm.at("architecture_stats").at("qk_v_route_js_divergence").as_double());
    if (const Value* f = arm.find("full_validation_lm_loss")) {
      full.push_back(f->as_double());
      full_ppl.push_back(arm.at("full_validation_perplexity").as_double());
    }
  }
  Value agg = per_seed[0].at(name);
  agg["lm_loss"] = mean_of(loss);
  agg["lm_loss_std"] = sample_std(loss);
  agg["perplexity"] = mean_of(ppl);
  agg["perplexity_std"] = sample_std(ppl);
  if (full.size() == per_seed.size()) {  // the full split's NLL, like lm_loss, over seeds
    agg["full_validation_lm_loss"] = mean_of(full);
    agg["full_validation_lm_loss_std"] = sample_std(full);
    agg["full_validation_perplexity"] = mean_of(full_ppl);
  }
  agg["architecture_stats"]["qk_v_route_js_divergence"] = mean_of(js);
  agg["seeds"] = seeds_json(seeds);
  return agg;
}

// Step 3, parity protocol: the reference's recorded numbers, when this run is the reference's run
// (the parity config, seed 42); null otherwise.
Value parity_reference(const ReproduceOptions& opt) {
  RunConfig reference = protocol_run_config("parity");
  reference.model.vocab =
      opt.config.model.vocab;            // the tokenizer's, compared through its hash elsewhere
  reference.preset = opt.config.preset;  // a name only: the numbers are compared
  if (opt.protocol != "parity" || opt.seeds != std::vector<uint64_t>{42} ||
      !(to_json(arm_run_config(opt.config, residual_mode("rd_attnres"), 42)) ==
        to_json(arm_run_config(reference, residual_mode("rd_attnres"), 42))))
    return Value();
  Value ref;
  for (size_t a = 0; a < 2; ++a) {
    Value r;
    r["lm_loss"] = kReferenceLoss[a];
    r["perplexity"] = kReferencePpl[a];
    r["qk_v_route_js_divergence"] = kReferenceJs[a];
    ref[opt.pair[a].name] = r;
  }
  return ref;
}

// Step 4, paired protocol: per-seed differences method − baseline of the validation NLL, their
// statistics, and the method arm's per-layer JS on the validation windows over seeds.
Value paired_statistics(const ReproduceOptions& opt, const std::vector<Value>& per_seed,
                        const Value& diverged) {
  const std::string& baseline = opt.pair[0].name;
  const std::string& method = opt.pair[1].name;
  std::vector<double> b_nll, m_nll;
  for (const Value& s : per_seed) {
    b_nll.push_back(nll_of(s.at(baseline)));
    m_nll.push_back(nll_of(s.at(method)));
  }
  const PairedSummary ps = paired_summary(b_nll, m_nll);
  const DataConfig& data = opt.config.data;
  Value p;
  p["metric"] = data.eval_full
                    ? "full validation NLL (nats/token)"
                    : fmt::format("validation lm_loss (nats/token, {} windows)", data.eval_windows);
  p["baseline"] = baseline;
  p["method"] = method;
  p["difference"] = fmt::format("{} − {}", method, baseline);
  p["n"] = ps.n;
  // The headline's relative change, in the same metric: the seeds' mean NLL of each arm, and the
  // perplexity of that mean NLL.
  const double b_mean = mean_of(b_nll), m_mean = mean_of(m_nll);
  p["baseline_mean"] = b_mean;
  p["method_mean"] = m_mean;
  p["relative_percent"] = 100.0 * (m_mean - b_mean) / b_mean;
  p["perplexity_relative_percent"] = 100.0 * std::expm1(m_mean - b_mean);
  p["seeds_total"] = static_cast<int64_t>(opt.seeds.size());
  p["diverged"] = diverged;
  p["differences_method_minus_baseline"] = doubles(ps.differences);
  p["wins_method"] = ps.wins;
  p["ties"] = ps.ties;
  p["mean_difference"] = ps.mean_difference;
  p["std_difference"] = ps.std_difference;
  p["ci95"] = Array{Value(ps.ci95_low), Value(ps.ci95_high)};
  p["t_statistic"] = ps.t_statistic;
  p["t_test_p"] = ps.t_test_p;
  p["sign_test_p"] = ps.sign_test_p;
  // The effect in perplexity: the ratio of the perplexities the mean NLL difference implies.
  p["perplexity_percent"] = perplexity_percent(ps.mean_difference);
  p["perplexity_percent_ci95"] =
      Array{Value(perplexity_percent(ps.ci95_low)), Value(perplexity_percent(ps.ci95_high))};
  p["perplexity_percent_definition"] =
      "100·(exp(mean NLL difference) − 1), the interval's ends mapped the same way";
  p["verdict"] = paired_verdict(ps, kEffectBoundPercent);
  p["effect_bound_percent"] = kEffectBoundPercent;
  const RunConfig& c = opt.config;
  p["tokens_seen_per_arm"] = c.training.steps * c.training.batch * c.model.seq_len;
  std::vector<std::vector<double>> per_layer;
  for (const Value& s : per_seed) {
    std::vector<double> js = to_doubles(s.at(method).at("routes_validation").at("js_per_layer"));
    if (per_layer.size() < js.size()) per_layer.resize(js.size());
    for (size_t l = 0; l < js.size(); ++l) per_layer[l].push_back(js[l]);
  }
  Array js_layers;
  for (size_t l = 0; l < per_layer.size(); ++l) {
    Object o;
    o.emplace_back("layer", static_cast<int64_t>(l));
    o.emplace_back("mean_over_seeds", mean_of(per_layer[l]));
    o.emplace_back("std_over_seeds", sample_std(per_layer[l]));
    o.emplace_back("per_seed", doubles(per_layer[l]));
    js_layers.emplace_back(std::move(o));
  }
  p["validation_js_per_layer"] = Value(std::move(js_layers));
  return p;
}

// metrics.json in the shape of the reference's committed metrics file (§6.5), with real provenance.
Value metrics_json(const ReproduceOptions& opt, const Value& result, const std::string& dir) {
  Value metrics;
  metrics["seed"] = static_cast<int64_t>(opt.seeds[0]);
  metrics["dataset"] = "WikiText-2";
  metrics["steps"] = opt.config.training.steps;
  for (const char* key : {"baseline", "method"}) {
    const Value& a = result.at(key);
    Value m;
    m["name"] = a.at("name");
    m["lm_loss"] = std::round(a.at("lm_loss").as_double() * 1e10) / 1e10;
    m["perplexity"] = std::round(a.at("perplexity").as_double() * 1e8) / 1e8;
    m["parameters"] = a.at("parameters");
    if (std::string(key) == "method")
      m["qk_v_route_js_divergence"] =
          std::round(a.at("architecture_stats").at("qk_v_route_js_divergence").as_double() * 1e10) /
          1e10;
    metrics[key] = m;
  }
  metrics["relative"]["lm_loss_percent"] =
      std::round(result.at("relative").at("lm_loss_percent").as_double() * 1e6) / 1e6;
  metrics["relative"]["perplexity_percent"] =
      std::round(result.at("relative").at("perplexity_percent").as_double() * 1e6) / 1e6;
  metrics["schema_version"] = 2;
  metrics["manifest_ref"] = "reproduction:rd-attnres";
  metrics["evaluation_protocol"] = result.at("evaluation_protocol");
  Value prov;
  prov["artifact_path"] = dir + "/metrics.json";
  prov["written_by"] = "depthgrad reproduce (not hand-curated)";
  prov["original_code_commit"] = build_commit();
  prov["dataset_fingerprint"] = result.at("dataset").at("sha256");
  prov["build"] = result.at("provenance");
  metrics["provenance"] = prov;
  return metrics;
}

}  // namespace

SeedSplit split_seed_results(const std::vector<Value>& all_seeds,
                             const std::vector<ReproduceArm>& pair) {
  SeedSplit out;
  for (const Value& s : all_seeds) {
    bool finished = true;
    for (const ReproduceArm& arm : pair) {
      const Value& a = s.at(arm.name);
      if (const Value* t = a.find("threads"))
        if (std::find(out.threads.begin(), out.threads.end(), t->as_int()) == out.threads.end())
          out.threads.push_back(t->as_int());
      if (a.find("diverged")) {
        finished = false;
        Object d;
        d.emplace_back("seed", s.at("seed"));
        d.emplace_back("arm", arm.name);
        d.emplace_back("step", a.at("diverged_at_step"));
        d.emplace_back("loss", a.at("diverged_loss"));
        out.diverged.emplace_back(std::move(d));
      } else {
        out.compute_seconds +=
            a.at("training").at("seconds").as_double() + a.at("eval_seconds").as_double();
      }
    }
    (finished ? out.finished : out.diverged_seeds).push_back(s);
  }
  return out;
}

namespace reproduce_detail {

// One arm in the reference's result layout (§6.3) plus depthgrad's training curves and routes.
Value arm_json(const ArmResult& r, uint64_t seed) {
  const bool decoupled = has_v_route(r.config.mode);
  Object arm;
  arm.emplace_back("name", r.name);
  arm.emplace_back("lm_loss", r.lm_loss);
  arm.emplace_back("lm_loss_std", 0.0);
  arm.emplace_back("perplexity", r.perplexity);
  arm.emplace_back("perplexity_std", 0.0);
  if (r.full_eval_tokens > 0) {
    arm.emplace_back("full_validation_lm_loss", r.full_lm_loss);
    arm.emplace_back("full_validation_perplexity", std::exp(std::min(r.full_lm_loss, 20.0)));
    arm.emplace_back("full_validation_tokens", r.full_eval_tokens);
  }
  arm.emplace_back("initial_loss", r.initial_loss);
  arm.emplace_back("final_loss", r.final_loss);
  arm.emplace_back("parameters", r.parameters);
  arm.emplace_back("device", "cpu");
  arm.emplace_back("optimizer", "adamw");
  Object stats;
  stats.emplace_back("qk_v_route_js_divergence", r.train_routes.js_reference);
  stats.emplace_back("residual_sources_last_layer", static_cast<double>(r.config.layers));
  stats.emplace_back("qk_v_role_decoupled", decoupled ? 1.0 : 0.0);
  stats.emplace_back("extra_route_vectors_per_layer", decoupled ? 2.0 : 1.0);
  arm.emplace_back("architecture_stats", Value(std::move(stats)));
  arm.emplace_back("seeds", Array{Value(static_cast<int64_t>(seed))});
  Object training;
  training.emplace_back("losses", doubles(r.losses));
  training.emplace_back("grad_norms_before_clip", doubles(r.grad_norms));
  training.emplace_back("clipped_steps", r.clipped_steps);
  training.emplace_back("seconds", r.train_seconds);
  arm.emplace_back("training", Value(std::move(training)));
  arm.emplace_back("routes_last_train_batch", routes_json(r.train_routes));
  arm.emplace_back("routes_validation", routes_json(r.eval_routes));
  arm.emplace_back("eval_seconds", r.eval_seconds);
  return Value(std::move(arm));
}

// 1234567 -> "1,234,567"
std::string fmt_int(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// result.json (without "artifacts", which write_outputs adds).
Value assemble_result(const ReproduceOptions& opt, const Corpus& corpus,
                      const std::vector<Value>& all_seeds, double wall_seconds) {
  const PaperInfo& paper = find_paper(opt.paper);
  SeedSplit split = split_seed_results(all_seeds, opt.pair);
  const std::vector<Value>& per_seed = split.finished;
  const std::vector<Value>& diverged_seeds = split.diverged_seeds;
  std::vector<uint64_t> finished_seeds;
  for (const Value& s : per_seed)
    finished_seeds.push_back(static_cast<uint64_t>(s.at("seed").as_int()));
  Array& diverged = split.diverged;
  const double compute_seconds = split.compute_seconds;
  const std::vector<int64_t>& thread_counts = split.threads;
  if (per_seed.empty()) {
    std::string what;
    for (const Value& d : diverged)
      what += fmt::format("{}seed {} {} at step {}", what.empty() ? "" : ", ",
                          d.at("seed").as_int(), d.at("arm").as_string(), d.at("step").as_int());
    throw std::runtime_error(fmt::format(
        "every seed had a diverged arm ({}); the state file records them, no statistics", what));
  }
  Value result;
  result["schema_version"] = 2;
  Object paper_json;
  paper_json.emplace_back("key", paper.key);
  paper_json.emplace_back("arxiv_id", paper.arxiv_id);
  paper_json.emplace_back("title", paper.title);
  paper_json.emplace_back("url", paper.url);
  paper_json.emplace_back("organization", paper.organization);
  result["paper"] = Value(std::move(paper_json));
  result["protocol"] = opt.protocol;
  result["dataset"] = dataset_json(corpus);
  result["setup"] = setup_json(opt);
  result["config"] = to_json(arm_run_config(opt.config, opt.pair[1].mode, opt.seeds[0]));
  Value pair;
  pair["baseline"] = opt.pair[0].name;
  pair["method"] = opt.pair[1].name;
  pair["label"] = fmt::format("{} vs {}", opt.pair[1].name, opt.pair[0].name);
  result["pair"] = pair;
  result["baseline"] = arm_over_seeds(per_seed, opt.pair[0].name, finished_seeds);
  result["method"] = arm_over_seeds(per_seed, opt.pair[1].name, finished_seeds);
  Value scale;  // what the cross-scale report (scales.h) reads
  scale["preset"] = opt.config.preset;
  scale["parameters_baseline"] = result.at("baseline").at("parameters");
  scale["parameters_method"] = result.at("method").at("parameters");
  scale["tokens_seen_per_arm"] =
      opt.config.training.steps * opt.config.training.batch * opt.config.model.seq_len;
  scale["compute_seconds"] = compute_seconds;
  Array threads;
  for (int64_t t : thread_counts) threads.emplace_back(t);
  scale["threads"] = Value(std::move(threads));
  result["scale"] = scale;
  const double bl = result.at("baseline").at("lm_loss").as_double(),
               ml = result.at("method").at("lm_loss").as_double();
  const double bp = result.at("baseline").at("perplexity").as_double(),
               mp = result.at("method").at("perplexity").as_double();
  result["relative"]["lm_loss_percent"] = 100.0 * (ml - bl) / bl;
  result["relative"]["perplexity_percent"] = 100.0 * (mp - bp) / bp;
  Value pr;
  pr["120m_perplexity_percent"] = -2.97;
  pr["343m_perplexity_percent"] = -2.43;
  pr["paired_training_wins"] = 10;
  pr["paired_training_runs"] = 10;
  result["paper_results"] = pr;
  result["omitted"]["instruction_loss"] =
      "The Stanford Alpaca instruction set is not part of depthgrad's pinned data, so "
      "instruction_loss, primary, "
      "public_composite and fitness are not computed. None of them affects lm_loss, perplexity or "
      "the JS statistic (§7).";
  result["seed_results"] = Array(per_seed.begin(), per_seed.end());
  if (!diverged_seeds.empty())
    result["diverged_seed_results"] = Array(diverged_seeds.begin(), diverged_seeds.end());
  if (opt.protocol == "paired" || all_seeds.size() > 1)
    result["paired"] = paired_statistics(opt, per_seed, Value(std::move(diverged)));
  result["scope"] = opt.protocol == "parity"
                        ? "Exact-parity micro run of the reference: one seed, 30 steps, 2 layers. "
                          "A mechanism check, not the paper's 120M/343M scale."
                        : "Paired multi-seed protocol: both arms per seed on identical data order; "
                          "statistics over seeds.";
  Value ev;
  ev["tier"] = "l2_public_dataset";
  ev["seeds"] = seeds_json(opt.seeds);
  ev["formal_comparison"] = opt.seeds.size() >= 3;
  ev["claim_policy"] = opt.seeds.size() >= 3
                           ? "paired multi-seed comparison; see paired statistics"
                           : "single/few-seed smoke result; do not claim a stable improvement";
  result["evaluation_protocol"] = ev;
  Value fid;
  fid["level"] = paper.fidelity;
  fid["omitted_core_components"] =
      Array{Value("120M/343M pretraining scale"), Value("paper training corpus")};
  result["reproduction_fidelity"] = fid;
  Value rt;
  rt["requested_device"] = "cpu";
  rt["resolved_device"] = "cpu";
  rt["cpu_threads"] = opt.threads;
  rt["wall_seconds"] = wall_seconds;
  rt["tokenizer_seconds"] = corpus.tokenizer_seconds;
  rt["tokenizer_from_cache"] = corpus.tokenizer_from_cache;
  result["runtime"] = rt;
  result["provenance"] = provenance_json(opt.threads);
  result["provenance"]["dataset_dir"] = opt.data_dir;
  result["provenance"]["dataset_sha256"] = result.at("dataset").at("sha256");
  if (Value ref = parity_reference(opt); !ref.is_null()) result["reference_recorded"] = ref;
  return result;
}

// The comparison table as printed.
std::string comparison_table(const Value& result) {
  std::string table =
      "| arm | lm_loss | perplexity | parameters | QK/V route JS |\n|---|---:|---:|---:|---:|\n";
  for (const char* key : {"baseline", "method"}) {
    const Value& a = result.at(key);
    table += fmt::format("| {} | {:.10f} | {:.8f} | {} | {:.10f} |\n", a.at("name").as_string(),
                         a.at("lm_loss").as_double(), a.at("perplexity").as_double(),
                         fmt_int(a.at("parameters").as_int()),
                         a.at("architecture_stats").at("qk_v_route_js_divergence").as_double());
  }
  const std::string baseline = result.at("baseline").at("name").as_string(),
                    method = result.at("method").at("name").as_string();
  // lm_loss is the reference's evaluation windows; the paired statistics may use the full split.
  const Value& config = result.at("config");
  const int64_t windows = config.at("data").at("eval_windows").as_int();
  table += fmt::format("lm_loss and perplexity: {} of {} tokens{}\n",
                       windows > 0 ? fmt::format("{} validation windows", windows)
                                   : std::string("every validation window"),
                       config.at("model").at("seq_len").as_int(),
                       result.at("seed_results").size() > 1 ? ", mean over seeds" : "");
  table += fmt::format("relative ({} vs {}) on lm_loss: {:+.4f}%, perplexity {:+.4f}%\n", method,
                       baseline, result.at("relative").at("lm_loss_percent").as_double(),
                       result.at("relative").at("perplexity_percent").as_double());
  if (const Value* ref = result.find("reference_recorded")) {
    table += "reference recorded (upstream): ";
    for (size_t a = 0; a < 2; ++a) {
      const std::string& name = a == 0 ? baseline : method;
      const Value& got = result.at(a == 0 ? "baseline" : "method");
      table += fmt::format("{} lm_loss {:.10f} (Δ {:+.2e}){}", name,
                           ref->at(name).at("lm_loss").as_double(),
                           got.at("lm_loss").as_double() - kReferenceLoss[a], a == 0 ? "; " : "\n");
    }
  }
  if (const Value* p = result.find("paired")) {
    table += fmt::format(
        "relative ({} vs {}) on the {} (mean over seeds): {:+.3g}%, perplexity {:+.3g}%\n", method,
        baseline, p->at("metric").as_string(), p->at("relative_percent").as_double(),
        p->at("perplexity_relative_percent").as_double());
    table += fmt::format(
        "paired over {} seeds ({}): {} − {} mean {:+.3e} nats, 95% CI [{:+.3e}, {:+.3e}], {} "
        "wins {}/{}, sign test p = {:.4g}, t-test p = {:.4g}\n",
        p->at("n").as_int(), p->at("metric").as_string(), method, baseline,
        p->at("mean_difference").as_double(), p->at("ci95").at(size_t{0}).as_double(),
        p->at("ci95").at(size_t{1}).as_double(), method, p->at("wins_method").as_int(),
        p->at("n").as_int(), p->at("sign_test_p").as_double(), p->at("t_test_p").as_double());
    table += fmt::format(
        "perplexity {:+.3f}% (95% CI [{:+.3f}%, {:+.3f}%]; {}); {} tokens seen per arm\n",
        p->at("perplexity_percent").as_double(),
        p->at("perplexity_percent_ci95").at(size_t{0}).as_double(),
        p->at("perplexity_percent_ci95").at(size_t{1}).as_double(), p->at("verdict").as_string(),
        fmt_int(p->at("tokens_seen_per_arm").as_int()));
    for (const Value& d : p->at("diverged").as_array())
      table += fmt::format(
          "diverged: seed {} {} at step {} (loss {}); that seed is left out of "
          "the statistics\n",
          d.at("seed").as_int(), d.at("arm").as_string(), d.at("step").as_int(),
          d.at("loss").as_string());
  }
  return table;
}

// Step 5: tokenizer.json, metrics.json, result.json, report.md and report.html, each atomically.
void write_outputs(const std::string& dir, const ReproduceOptions& opt, const Corpus& corpus,
                   Value& result) {
  make_dirs(dir);
  result["artifacts"]["directory"] = dir;
  write_file_atomic(dir + "/tokenizer.json", corpus.tokenizer_json);
  write_file_atomic(dir + "/metrics.json", json::dump(metrics_json(opt, result, dir), 2) + "\n");
  write_file_atomic(dir + "/result.json", json::dump(result, 2) + "\n");
  write_file_atomic(dir + "/report.md", render_reproduce_markdown(result));
  write_file_atomic(dir + "/report.html", render_reproduce_html(result));
}

}  // namespace reproduce_detail

}  // namespace dg
