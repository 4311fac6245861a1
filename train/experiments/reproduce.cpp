// The rd-attnres reproduction: parity and paired protocols, result files (see reproduce.h).
#include "train/experiments/reproduce.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "tensor/threads.h"
#include "train/data/corpus.h"
#include "train/data/data_files.h"
#include "train/io/files.h"
#include "train/io/run_record.h"
#include "train/experiments/report.h"
#include "train/experiments/stats.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;

// ---- papers ------------------------------------------------------------------------------------------------

const std::vector<PaperInfo>& known_papers() {
  static const std::vector<PaperInfo> papers{
      {"rd-attnres", "2608.01075", "Role-Decoupled Attention Residuals", "https://arxiv.org/abs/2608.01075",
       "not recorded", "core_mechanism"},
  };
  return papers;
}

const PaperInfo& find_paper(const std::string& key) {
  for (const PaperInfo& p : known_papers())
    if (p.key == key) return p;
  std::string keys;
  for (const PaperInfo& p : known_papers()) keys += (keys.empty() ? "" : ", ") + p.key;
  throw std::invalid_argument(fmt::format("--paper: unknown paper key '{}' (known: {}; see `depthgrad list`)", key, keys));
}

// ---- small helpers -----------------------------------------------------------------------------------------

std::string default_run_dir(const std::string& output_dir, const std::string& paper_key) {
  const PaperInfo& paper = find_paper(paper_key);
  return fmt::format("{}/{}-{}/{}", output_dir, paper.arxiv_id, paper.key, timestamp_now());
}

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
  auto q = [&](double f) { return v[static_cast<size_t>(f * static_cast<double>(v.size() - 1) + 0.5)]; };
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

double nll_of(const Value& arm) {
  if (const Value* full = arm.find("full_validation_lm_loss")) return full->as_double();
  return arm.at("lm_loss").as_double();
}

std::string fmt_int(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

const double kReferenceLoss[2] = {5.7570388168, 5.7630852014};
const double kReferencePpl[2] = {316.40999236, 318.32892431};
const double kReferenceJs[2] = {0.0, 0.0048934901};

}  // namespace

// ---- the run -------------------------------------------------------------------------------------------------

ReproduceOutput run_reproduce(const ReproduceOptions& opt) {
  const PaperInfo& paper = find_paper(opt.paper);
  if (opt.protocol != "parity" && opt.protocol != "paired")
    throw std::invalid_argument(fmt::format("--protocol: unknown protocol '{}' (expected parity or paired)", opt.protocol));
  if (opt.seeds.empty()) throw std::invalid_argument("--seeds: no seeds given");
  if (opt.steps < 1) throw std::invalid_argument(fmt::format("--steps: must be >= 1, got {}", opt.steps));
  auto say = [&](const std::string& s) {
    if (opt.on_message) opt.on_message(s);
  };
  const auto started = std::chrono::steady_clock::now();
  const int rank = opt.world ? opt.world->rank() : 0, ranks = opt.world ? opt.world->size() : 1;
  if (ranks > 1 && opt.protocol != "paired")
    throw std::invalid_argument("--protocol parity runs in one process; only the paired protocol spreads its seeds over MPI ranks");
  if (ranks > 1 && !opt.state_file.empty()) throw std::invalid_argument("--state-file: only for one process (not under mpirun)");

  // ---- data ---- (rank 0 first: it fills the tokenizer cache the others then read)
  if (rank != 0) opt.world->barrier();
  CorpusOptions co;
  co.data_dir = opt.data_dir;
  co.cache_dir = opt.cache_dir;
  co.vocab_size = opt.vocab_size;
  co.train_limit = opt.train_limit;
  co.eval_limit = opt.eval_limit;
  Corpus corpus = load_wikitext_corpus(co);
  if (ranks > 1 && rank == 0) opt.world->barrier();
  say(fmt::format("tokenizer: BPE-{} {} in {:.2f} s; {} train ids ({} used), {} validation ids ({} used); encoded in {:.2f} s{}",
                  corpus.tokenizer.vocab_size(), corpus.tokenizer_from_cache ? "loaded from cache" : "trained",
                  corpus.tokenizer_seconds, fmt_int(corpus.train_total), fmt_int(static_cast<int64_t>(corpus.train.size())),
                  fmt_int(corpus.validation_total), fmt_int(static_cast<int64_t>(corpus.validation.size())), corpus.encode_seconds,
                  corpus.ids_from_cache ? " (cache)" : ""));

  // ---- arms ----
  MicroLMConfig base;
  base.vocab = corpus.tokenizer.vocab_size();
  base.dim = opt.dim;
  base.layers = opt.layers;
  base.heads = opt.heads;
  base.kv_heads = opt.kv_heads;
  base.seq_len = opt.seq_len;
  base.expansion = opt.expansion;
  const std::vector<std::pair<std::string, ResidualMode>> arms{{"block_attnres", ResidualMode::block_attnres},
                                                               {"rd_attnres", ResidualMode::rd_attnres}};
  TrainOptions to;
  to.training.steps = opt.steps;
  to.training.batch = opt.batch;
  to.training.adamw.lr = opt.lr;
  to.training.adamw.decay = parse_decay_policy(opt.decay);
  to.training.schedule = Schedule::parse(opt.schedule, opt.lr, opt.warmup, opt.steps);
  to.training.init = opt.init;
  to.eval_full = opt.eval_full;

  // Resumable state (paired runs): {"key": ..., "completed": {"<seed>": {"<arm>": arm}}}
  const std::string state_key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", opt.paper, opt.protocol, opt.steps, opt.layers, opt.dim,
                                            opt.heads, opt.kv_heads, opt.seq_len, opt.batch, opt.lr, opt.schedule, opt.decay,
                                            init_scheme_name(opt.init), opt.eval_full) + "|" + corpus.tokenizer_sha256;
  Value state;
  if (!opt.state_file.empty() && file_exists(opt.state_file)) {
    state = json::parse(read_file(opt.state_file), opt.state_file);
    if (state.at("key").as_string() != state_key)
      throw std::invalid_argument(fmt::format("--state-file: {} belongs to a run with other settings; use a new state file", opt.state_file));
  } else {
    state["key"] = state_key;
    state["completed"] = Object{};
  }

  std::vector<Value> per_seed(opt.seeds.size());
  for (size_t si = 0; si < opt.seeds.size(); ++si) {
    if (static_cast<int>(si % ranks) != rank) continue;  // another rank's seed
    const uint64_t seed = opt.seeds[si];
    Object seed_result;
    seed_result.emplace_back("seed", static_cast<int64_t>(seed));
    for (const auto& [arm_name, mode] : arms) {
      const Value* done = state.at("completed").find(std::to_string(seed));
      if (done && done->find(arm_name)) {
        say(fmt::format("seed {} {}: done earlier (state file)", seed, arm_name));
        seed_result.emplace_back(arm_name, done->at(arm_name));
        continue;
      }
      MicroLMConfig config = base;
      config.mode = mode;
      TrainOptions arm_opt = to;
      arm_opt.training.seed = seed;
      if (opt.on_step) {
        std::string name = arm_name;
        size_t n = opt.seeds.size();
        arm_opt.on_step = [&opt, name, seed, si, n](const StepLog& log) { opt.on_step(name, seed, si, n, log); };
      }
      ArmResult r = train_and_evaluate(arm_name, config, corpus.train, corpus.validation, arm_opt);
      Value arm = arm_json(r, seed);
      seed_result.emplace_back(arm_name, arm);
      state["completed"][std::to_string(seed)][arm_name] = arm;
      if (!opt.state_file.empty()) write_file_atomic(opt.state_file, json::dump(state, 1));
      say(fmt::format("seed {} {}: lm_loss {:.6f} perplexity {:.3f}{} ({:.1f} s)", seed, arm_name, r.lm_loss, r.perplexity,
                      r.full_eval_tokens ? fmt::format(", full validation NLL {:.6f}", r.full_lm_loss) : "", r.train_seconds + r.eval_seconds));
    }
    per_seed[si] = Value(std::move(seed_result));
  }
  if (ranks > 1) {  // every rank's seeds to every rank, in seed order
    Array mine;
    for (size_t si = rank; si < opt.seeds.size(); si += ranks) mine.push_back(per_seed[si]);
    const std::vector<std::string> all = opt.world->all_gather(json::dump(Value(std::move(mine))));
    for (int r = 0; r < ranks; ++r) {
      const Value theirs = json::parse(all[r], fmt::format("rank {}'s seed results", r));
      size_t k = 0;
      for (size_t si = r; si < opt.seeds.size(); si += ranks) per_seed[si] = theirs.as_array().at(k++);
    }
  }

  // ---- assemble result.json ----
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
  result["dataset"] = ds;
  Value setup;
  setup["seeds"] = [&] { Array a; for (uint64_t s : opt.seeds) a.emplace_back(static_cast<int64_t>(s)); return Value(std::move(a)); }();
  setup["steps_per_variant"] = opt.steps;
  setup["dimensions"] = opt.dim;
  setup["layers"] = opt.layers;
  setup["heads"] = opt.heads;
  setup["kv_heads"] = opt.kv_heads;
  setup["sequence_length"] = opt.seq_len;
  setup["batch_size"] = opt.batch;
  setup["expansion"] = opt.expansion;
  setup["learning_rate"] = opt.lr;
  setup["schedule"] = opt.schedule;
  setup["warmup_steps"] = opt.warmup;
  setup["weight_decay"] = 0.01;
  setup["weight_decay_applies_to"] = opt.decay;
  setup["gradient_clip"] = 1.0;
  setup["init"] = init_scheme_name(opt.init);
  setup["evaluation"] = opt.eval_full ? "reference windows + full validation split" : "reference (32 windows of 64)";
  setup["same_tokens_optimizer_and_budget"] = true;
  setup["evolve_architecture"] = "rd_attnres";
  setup["evolve_optimizer"] = "adamw";
  if (opt.kv_heads != opt.heads)
    setup["note"] = "kv_heads < heads: grouped-query attention is applied (the reference ignores kv_heads)";
  result["setup"] = setup;

  // Per-arm aggregates over seeds (means and sample std).
  std::vector<double> b_nll, m_nll;
  for (size_t a = 0; a < arms.size(); ++a) {
    const std::string& name = arms[a].first;
    std::vector<double> loss, ppl, js, full;
    for (const Value& s : per_seed) {
      const Value& arm = s.at(name);
      loss.push_back(arm.at("lm_loss").as_double());
      ppl.push_back(arm.at("perplexity").as_double());
      js.push_back(arm.at("architecture_stats").at("qk_v_route_js_divergence").as_double());
      (a == 0 ? b_nll : m_nll).push_back(nll_of(arm));
    }
    Value agg = per_seed.size() == 1 ? per_seed[0].at(name) : per_seed[0].at(name);
    agg["lm_loss"] = mean_of(loss);
    agg["lm_loss_std"] = sample_std(loss);
    agg["perplexity"] = mean_of(ppl);
    agg["perplexity_std"] = sample_std(ppl);
    agg["architecture_stats"]["qk_v_route_js_divergence"] = mean_of(js);
    Array seeds_arr;
    for (uint64_t s : opt.seeds) seeds_arr.emplace_back(static_cast<int64_t>(s));
    agg["seeds"] = Value(std::move(seeds_arr));
    result[a == 0 ? "baseline" : "method"] = agg;
  }
  const double bl = result.at("baseline").at("lm_loss").as_double(), ml = result.at("method").at("lm_loss").as_double();
  const double bp = result.at("baseline").at("perplexity").as_double(), mp = result.at("method").at("perplexity").as_double();
  result["relative"]["lm_loss_percent"] = 100.0 * (ml - bl) / bl;
  result["relative"]["perplexity_percent"] = 100.0 * (mp - bp) / bp;
  Value pr;
  pr["120m_perplexity_percent"] = -2.97;
  pr["343m_perplexity_percent"] = -2.43;
  pr["paired_training_wins"] = 10;
  pr["paired_training_runs"] = 10;
  result["paper_results"] = pr;
  result["omitted"]["instruction_loss"] =
      "The Stanford Alpaca instruction set is not part of depthgrad's pinned data, so instruction_loss, primary, "
      "public_composite and fitness are not computed. None of them affects lm_loss, perplexity or the JS statistic (§7).";
  result["seed_results"] = Array(per_seed.begin(), per_seed.end());
  if (opt.protocol == "paired" || per_seed.size() > 1) {
    PairedSummary ps = paired_summary(b_nll, m_nll);
    Value p;
    p["metric"] = opt.eval_full ? "full validation NLL (nats/token)" : "validation lm_loss (nats/token, 32 windows)";
    p["n"] = ps.n;
    p["differences_method_minus_baseline"] = doubles(ps.differences);
    p["wins_method"] = ps.wins;
    p["ties"] = ps.ties;
    p["mean_difference"] = ps.mean_difference;
    p["std_difference"] = ps.std_difference;
    p["ci95"] = Array{Value(ps.ci95_low), Value(ps.ci95_high)};
    p["t_statistic"] = ps.t_statistic;
    p["t_test_p"] = ps.t_test_p;
    p["sign_test_p"] = ps.sign_test_p;
    // JS per layer on validation windows after training (rd arm), mean over seeds and distribution.
    std::vector<std::vector<double>> per_layer;
    for (const Value& s : per_seed) {
      std::vector<double> js = to_doubles(s.at("rd_attnres").at("routes_validation").at("js_per_layer"));
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
    result["paired"] = p;
  }
  result["scope"] = opt.protocol == "parity"
                        ? "Exact-parity micro run of the reference: one seed, 30 steps, 2 layers. A mechanism check, not the paper's 120M/343M scale."
                        : "Paired multi-seed protocol: both arms per seed on identical data order; statistics over seeds.";
  Value ev;
  ev["tier"] = "l2_public_dataset";
  ev["seeds"] = result.at("setup").at("seeds");
  ev["formal_comparison"] = opt.seeds.size() >= 3;
  ev["claim_policy"] = opt.seeds.size() >= 3 ? "paired multi-seed comparison; see paired statistics"
                                             : "single/few-seed smoke result; do not claim a stable improvement";
  result["evaluation_protocol"] = ev;
  Value fid;
  fid["level"] = paper.fidelity;
  fid["omitted_core_components"] = Array{Value("120M/343M pretraining scale"), Value("paper training corpus")};
  result["reproduction_fidelity"] = fid;
  Value rt;
  rt["requested_device"] = "cpu";
  rt["resolved_device"] = "cpu";
  rt["cpu_threads"] = opt.threads;
  rt["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  rt["tokenizer_seconds"] = corpus.tokenizer_seconds;
  rt["tokenizer_from_cache"] = corpus.tokenizer_from_cache;
  result["runtime"] = rt;
  result["provenance"] = provenance_json(opt.threads);
  result["provenance"]["dataset_dir"] = opt.data_dir;
  result["provenance"]["dataset_sha256"] = ds.at("sha256");
  if (opt.protocol == "parity" && opt.seeds.size() == 1 && opt.seeds[0] == 42 && opt.steps == 30) {
    Value ref;
    for (size_t a = 0; a < 2; ++a) {
      Value r;
      r["lm_loss"] = kReferenceLoss[a];
      r["perplexity"] = kReferencePpl[a];
      r["qk_v_route_js_divergence"] = kReferenceJs[a];
      ref[arms[a].first] = r;
    }
    result["reference_recorded"] = ref;
  }

  // ---- table ----
  std::string table = "| arm | lm_loss | perplexity | parameters | QK/V route JS |\n|---|---:|---:|---:|---:|\n";
  for (const char* key : {"baseline", "method"}) {
    const Value& a = result.at(key);
    table += fmt::format("| {} | {:.10f} | {:.8f} | {} | {:.10f} |\n", a.at("name").as_string(), a.at("lm_loss").as_double(),
                         a.at("perplexity").as_double(), fmt_int(a.at("parameters").as_int()),
                         a.at("architecture_stats").at("qk_v_route_js_divergence").as_double());
  }
  table += fmt::format("relative (rd vs block): lm_loss {:+.4f}%, perplexity {:+.4f}%\n", result.at("relative").at("lm_loss_percent").as_double(),
                       result.at("relative").at("perplexity_percent").as_double());
  if (const Value* ref = result.find("reference_recorded")) {
    table += "reference recorded (upstream): ";
    for (size_t a = 0; a < 2; ++a) {
      const Value& got = result.at(a == 0 ? "baseline" : "method");
      table += fmt::format("{} lm_loss {:.10f} (Δ {:+.2e}){}", arms[a].first, ref->at(arms[a].first).at("lm_loss").as_double(),
                           got.at("lm_loss").as_double() - kReferenceLoss[a], a == 0 ? "; " : "\n");
    }
  }
  if (const Value* p = result.find("paired")) {
    table += fmt::format("paired over {} seeds ({}): rd − block mean {:+.3e} nats, 95% CI [{:+.3e}, {:+.3e}], rd wins {}/{}, sign test p = {:.4g}, t-test p = {:.4g}\n",
                         p->at("n").as_int(), p->at("metric").as_string(), p->at("mean_difference").as_double(),
                         p->at("ci95").at(size_t{0}).as_double(), p->at("ci95").at(size_t{1}).as_double(), p->at("wins_method").as_int(),
                         p->at("n").as_int(), p->at("sign_test_p").as_double(), p->at("t_test_p").as_double());
  }

  ReproduceOutput out;
  out.table = table;
  if (opt.write_files && rank == 0) {
    const std::string dir = opt.run_dir.empty() ? default_run_dir(opt.output_dir, paper.key) : opt.run_dir;
    make_dirs(dir);
    out.run_dir = dir;
    result["artifacts"]["directory"] = dir;
    write_file_atomic(dir + "/tokenizer.json", corpus.tokenizer_json);
    // metrics.json in the shape of the reference's committed metrics file (§6.5), with real provenance.
    Value metrics;
    metrics["seed"] = static_cast<int64_t>(opt.seeds[0]);
    metrics["dataset"] = "WikiText-2";
    metrics["steps"] = opt.steps;
    for (const char* key : {"baseline", "method"}) {
      const Value& a = result.at(key);
      Value m;
      m["name"] = a.at("name");
      m["lm_loss"] = std::round(a.at("lm_loss").as_double() * 1e10) / 1e10;
      m["perplexity"] = std::round(a.at("perplexity").as_double() * 1e8) / 1e8;
      m["parameters"] = a.at("parameters");
      if (std::string(key) == "method")
        m["qk_v_route_js_divergence"] = std::round(a.at("architecture_stats").at("qk_v_route_js_divergence").as_double() * 1e10) / 1e10;
      metrics[key] = m;
    }
    metrics["relative"]["lm_loss_percent"] = std::round(result.at("relative").at("lm_loss_percent").as_double() * 1e6) / 1e6;
    metrics["relative"]["perplexity_percent"] = std::round(result.at("relative").at("perplexity_percent").as_double() * 1e6) / 1e6;
    metrics["schema_version"] = 2;
    metrics["manifest_ref"] = "reproduction:rd-attnres";
    metrics["evaluation_protocol"] = result.at("evaluation_protocol");
    Value prov;
    prov["artifact_path"] = dir + "/metrics.json";
    prov["written_by"] = "depthgrad reproduce (not hand-curated)";
    prov["original_code_commit"] = build_commit();
    prov["dataset_fingerprint"] = ds.at("sha256");
    prov["build"] = result.at("provenance");
    metrics["provenance"] = prov;
    write_file_atomic(dir + "/metrics.json", json::dump(metrics, 2) + "\n");
    write_file_atomic(dir + "/result.json", json::dump(result, 2) + "\n");
    write_file_atomic(dir + "/report.md", render_reproduce_markdown(result));
    write_file_atomic(dir + "/report.html", render_reproduce_html(result));
  }
  out.result = std::move(result);
  return out;
}

}  // namespace dg
