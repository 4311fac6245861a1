// The rd-attnres reproduction (see reproduce.h): papers, protocols and arms, options and resume
// key, and the run itself (every arm at every seed, over MPI ranks too). It neither prepares data
// nor builds results: reproduce_data.cpp and reproduce_result.cpp do.
#include "tools/attnres/reproduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <optional>

#include "tools/attnres/reproduce_internal.h"
#include "train/io/files.h"
#include "train/lm/batches.h"
#include "train/stop.h"

namespace dg {

using json::Array;
using json::Object;
using json::Value;
using namespace reproduce_detail;  // Say, ArmStore, the data and result steps

// ---- papers

const std::vector<PaperInfo>& known_papers() {
  static const std::vector<PaperInfo> papers{
      {"rd-attnres", "2608.01075", "Role-Decoupled Attention Residuals",
       "https://arxiv.org/abs/2608.01075", "not recorded", "core_mechanism"},
  };
  return papers;
}

const PaperInfo& find_paper(const std::string& key) {
  for (const PaperInfo& p : known_papers())
    if (p.key == key) return p;
  std::string keys;
  for (const PaperInfo& p : known_papers()) keys += (keys.empty() ? "" : ", ") + p.key;
  throw std::invalid_argument(
      fmt::format("--paper: unknown paper key '{}' (known: {}; see `depthgrad list`)", key, keys));
}

// ---- small helpers

std::string default_run_dir(const std::string& output_dir, const std::string& paper_key) {
  const PaperInfo& paper = find_paper(paper_key);
  return fmt::format("{}/{}-{}/{}", output_dir, paper.arxiv_id, paper.key, timestamp_now());
}

// ---- protocols and arms

RunConfig protocol_run_config(const std::string& protocol) {
  RunConfig c;  // the reference's model and training (tools/attnres/PROTOCOL.md §6)
  if (protocol == "parity") {
    c.data.full_byte_alphabet = false;  // the reference's tokenizer, byte for byte
    c.data.train_limit = 120000;
    c.data.eval_limit = 8000;
  } else if (protocol == "paired") {
    c.training.steps = 1000;
    c.training.schedule.kind = Schedule::Kind::warmup_cosine;
    c.training.schedule.warmup_steps =
        default_warmup_steps(c.training.schedule.kind, c.training.steps);
    c.training.adamw.decay = DecayPolicy::matrices_only;
    c.training.init = InitScheme::identical;
    c.data.eval_full = true;
  } else {
    throw std::invalid_argument(
        fmt::format("--protocol: unknown protocol '{}' (expected parity or paired)", protocol));
  }
  c.training.schedule.total_steps = c.training.steps;
  return c;
}

const std::vector<ReproduceArm>& reproduce_arms() {
  static const std::vector<ReproduceArm> arms{{"block_attnres", residual_mode("block_attnres")},
                                              {"rd_attnres", residual_mode("rd_attnres")}};
  return arms;
}

std::vector<ReproduceArm> parse_reproduce_pair(const std::string& text) {
  std::vector<ReproduceArm> pair;
  for (size_t b = 0; b <= text.size();) {
    const size_t e = std::min(text.find(',', b), text.size());
    const std::string name = text.substr(b, e - b);
    try {
      pair.push_back({name, parse_residual_mode(name)});
    } catch (const std::exception& err) {
      throw std::invalid_argument(fmt::format("--pair: {}", err.what()));
    }
    b = e + 1;
  }
  if (pair.size() != 2)
    throw std::invalid_argument(
        fmt::format("--pair: expected two residual modes A,B (baseline, method), got '{}'", text));
  if (pair[0].mode == pair[1].mode)
    throw std::invalid_argument(
        fmt::format("--pair: the two modes must differ, got {} twice", pair[0].name));
  return pair;
}

RunConfig arm_run_config(const RunConfig& shared, ResidualMode mode, uint64_t seed) {
  RunConfig c = shared;
  c.model.mode = mode;
  c.training.seed = seed;
  return c;
}

namespace {
// Over MPI ranks only the paired protocol runs, each rank with at least one seed.
void check_reproduce_ranks(const ReproduceOptions& opt) {
  const int ranks = opt.world ? opt.world->size() : 1;
  if (ranks == 1) return;
  if (opt.protocol != "paired")
    throw std::invalid_argument(
        "--protocol parity runs in one process; only --protocol paired spreads its seeds over "
        "MPI ranks");
  if (opt.seeds.size() < static_cast<size_t>(ranks))
    throw std::invalid_argument(
        fmt::format("--seeds: {} seed(s) cannot keep {} MPI ranks busy (the i-th seed, from 0, "
                    "runs on rank i mod {}): run with at most {} rank(s) or give more seeds",
                    opt.seeds.size(), ranks, ranks, opt.seeds.size()));
}

}  // namespace

void check_reproduce_options(const ReproduceOptions& opt) {
  find_paper(opt.paper);
  protocol_run_config(opt.protocol);  // throws for an unknown protocol
  if (opt.seeds.empty()) throw std::invalid_argument("--seeds: no seeds given");
  check_reproduce_ranks(opt);
  if (opt.pair.size() != 2 || opt.pair[0].mode == opt.pair[1].mode ||
      opt.pair[0].name != residual_mode_name(opt.pair[0].mode) ||
      opt.pair[1].name != residual_mode_name(opt.pair[1].mode))
    throw std::invalid_argument("--pair: expected two different residual modes, named as modes");
  if (opt.protocol == "parity" && opt.pair != reproduce_arms())
    throw std::invalid_argument(fmt::format(
        "--pair {},{}: the parity protocol is the reference's block_attnres vs rd_attnres run; "
        "compare other modes with --protocol paired",
        opt.pair[0].name, opt.pair[1].name));
  opt.config.validate();
  if (opt.config.data.dataset != "wikitext-2")
    throw std::invalid_argument(
        fmt::format("run config: data.dataset: the reproduction is defined on wikitext-2, got '{}'",
                    opt.config.data.dataset));
}

json::Value reproduce_resume_key(const ReproduceOptions& opt, const std::string& tokenizer_sha256) {
  Value key;
  key["paper"] = opt.paper;
  key["protocol"] = opt.protocol;
  key["tokenizer_sha256"] = tokenizer_sha256;
  if (opt.pair != reproduce_arms())
    key["pair"] = Array{Value(opt.pair[0].name), Value(opt.pair[1].name)};
  // Mode and seed are fixed here: every arm and seed of one run shares this key. So is
  // training.zero: where AdamW's moments and the gradients live changes no bit of a result; nor
  // do overlap (when the sum over ranks runs) and anomaly mode.
  RunConfig config = arm_run_config(opt.config, residual_mode("rd_attnres"), 0);
  config.training.zero = 0;
  config.training.overlap = true;
  config.training.detect_anomaly = false;
  key["config"] = to_json(config);
  return key;
}

namespace {
void collect_differences(const Value& a, const Value& b, const std::string& path,
                         std::vector<std::string>& out, size_t limit) {
  if (out.size() >= limit || a == b) return;
  auto name = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  if (a.is_object() && b.is_object()) {
    // Keys only one side has first (a new setting, a pair), then values that differ.
    for (const auto& [k, va] : a.as_object())
      if (!b.find(k) && out.size() < limit)
        out.push_back(fmt::format("{}: {} vs absent", name(k), json::dump(va)));
    for (const auto& [k, vb] : b.as_object())
      if (!a.find(k) && out.size() < limit)
        out.push_back(fmt::format("{}: absent vs {}", name(k), json::dump(vb)));
    for (const auto& [k, va] : a.as_object())
      if (const Value* vb = b.find(k)) collect_differences(va, *vb, name(k), out, limit);
    return;
  }
  out.push_back(fmt::format("{}: {} vs {}", path.empty() ? "(top level)" : path, json::dump(a),
                            json::dump(b)));
}

}  // namespace

std::vector<std::string> json_differences(const Value& a, const Value& b, size_t limit) {
  std::vector<std::string> out;
  collect_differences(a, b, "", out, limit);
  return out;
}

// ---- the run, step by step

namespace {

// Step 2: one arm at one seed, in the reference's result layout.
Value run_arm(const ReproduceOptions& opt, const Corpus& corpus, const ReproduceArm& arm,
              size_t seed_index, const Say& say) {
  const uint64_t seed = opt.seeds[seed_index];
  // A stop request is honoured after any step but the last (the arm then finishes: its route
  // statistics come from its last training forward).
  const std::function<void(const StepLog&)> on_step = [&opt, &arm, seed,
                                                       seed_index](const StepLog& log) {
    if (opt.on_step) opt.on_step(arm.name, seed, seed_index, opt.seeds.size(), log);
    if (log.step + 1 < log.steps)
      stop_if_requested(fmt::format("in seed {} {} after step {} of {}", seed, arm.name,
                                    log.step + 1, log.steps));
  };
  std::string checkpoint;
  if (!opt.arm_checkpoint_dir.empty()) {
    make_dirs(opt.arm_checkpoint_dir);
    checkpoint = fmt::format("{}/seed-{}-{}.safetensors", opt.arm_checkpoint_dir, seed, arm.name);
    if (file_exists(checkpoint))
      say(fmt::format("seed {} {}: resuming from {}", seed, arm.name, checkpoint));
  }
  const RunConfig run = arm_run_config(opt.config, arm.mode, seed);
  ArmResult r;
  try {
    r = train_and_evaluate(arm.name, run, corpus.train, corpus.validation, on_step, false,
                           checkpoint, opt.arm_checkpoint_every);
  } catch (const TrainingDiverged& d) {
    // Reported as diverged (the state file keeps it, so a resume does not retry it silently).
    if (!checkpoint.empty()) std::filesystem::remove(checkpoint);
    say(fmt::format("seed {} {}: diverged at step {} (loss {})", seed, arm.name, d.step, d.loss));
    Value diverged;
    diverged["name"] = arm.name;
    diverged["diverged"] = true;
    diverged["diverged_at_step"] = d.step;
    diverged["diverged_loss"] = fmt::format("{}", d.loss);  // nan or inf: not a JSON number
    diverged["parameters"] = run.model.parameter_count();
    diverged["seeds"] = Array{Value(static_cast<int64_t>(seed))};
    diverged["threads"] = opt.threads;
    return diverged;
  }
  if (!checkpoint.empty()) std::filesystem::remove(checkpoint);
  // Each number says what it was computed on.
  const int64_t seq_len = opt.config.model.seq_len;
  const size_t windows = eval_window_starts(static_cast<int64_t>(corpus.validation.size()), seq_len,
                                            opt.config.data.eval_windows)
                             .size();
  say(fmt::format(
      "seed {} {}: lm_loss {:.6f} perplexity {:.3f} ({} validation windows of {} tokens){} "
      "({:.1f} s)",
      seed, arm.name, r.lm_loss, r.perplexity, windows, seq_len,
      r.full_eval_tokens ? fmt::format(", full validation NLL {:.6f} ({} tokens)", r.full_lm_loss,
                                       r.full_eval_tokens)
                         : "",
      r.train_seconds + r.eval_seconds));
  Value result = arm_json(r, seed);
  result["threads"] = opt.threads;
  return result;
}

// The end of a run over MPI ranks, the one point every rank reaches, finished or stopped: every
// rank's seeds (the i-th seed on rank i mod N) to every rank, in seed order; or, when any rank was
// stopped, Interrupted on every rank (each kept its finished arms in its state file and saved its
// arm in training). A finished rank waits for the others' arms (without spinning); a stopped one
// waits `stop_wait` seconds (ReproduceOptions::rank_stop_wait_seconds), then ends the job.
void end_over_ranks(Collectives& world, std::vector<Value>& per_seed,
                    const std::optional<Interrupted>& stopped, double stop_wait) {
  const int rank = world.rank(), ranks = world.size();
  const double wait = stopped ? stop_wait : std::numeric_limits<double>::infinity();
  if (!world.barrier_within(wait))
    throw std::runtime_error(fmt::format(
        "{}, but the other ranks did not stop within {:.0f} s (was the signal sent to this rank "
        "alone?): ending the job; the finished arms are in the state files",
        stopped->what(), wait));
  Value mine;
  mine["stopped"] = stopped ? stopped->signal : 0;
  mine["why"] = stopped ? stopped->what() : "";
  Array seeds;
  if (!stopped)
    for (size_t si = rank; si < per_seed.size(); si += ranks) seeds.push_back(per_seed[si]);
  mine["seeds"] = std::move(seeds);
  const std::vector<std::string> all = world.all_gather(json::dump(mine));
  std::vector<Value> theirs;
  for (int r = 0; r < ranks; ++r)
    theirs.push_back(json::parse(all[r], fmt::format("rank {}'s seed results", r)));
  for (int r = 0; r < ranks; ++r) {
    const int signal = static_cast<int>(theirs[r].at("stopped").as_int());
    if (signal == 0) continue;
    if (stopped) throw *stopped;
    throw Interrupted(signal, fmt::format("rank {} was {}", r, theirs[r].at("why").as_string()));
  }
  for (int r = 0; r < ranks; ++r) {
    size_t k = 0;
    for (size_t si = r; si < per_seed.size(); si += ranks)
      per_seed[si] = theirs[r].at("seeds").as_array().at(k++);
  }
}

// Every arm at every seed, skipping what the state file already holds: one object per seed,
// {"seed": s, "<arm>": arm, ...}.
std::vector<Value> run_all_arms(const ReproduceOptions& opt, const Corpus& corpus, ArmStore& store,
                                const Say& say) {
  std::vector<Value> per_seed(opt.seeds.size());
  const int rank = opt.world ? opt.world->rank() : 0, ranks = opt.world ? opt.world->size() : 1;
  std::optional<Interrupted> stopped;  // over ranks: said at the end, where every rank meets
  try {
    for (size_t si = 0; si < opt.seeds.size(); ++si) {
      if (static_cast<int>(si % ranks) != rank) continue;  // another rank's seed
      const uint64_t seed = opt.seeds[si];
      Object seed_result;
      seed_result.emplace_back("seed", static_cast<int64_t>(seed));
      for (const ReproduceArm& arm : opt.pair) {
        if (const Value* done = store.find(seed, arm.name)) {
          say(fmt::format("seed {} {}: done earlier (state file)", seed, arm.name));
          seed_result.emplace_back(arm.name, *done);
          continue;
        }
        stop_if_requested(fmt::format("before seed {} {}", seed, arm.name));
        Value result = run_arm(opt, corpus, arm, si, say);
        store.add(seed, arm.name, result);
        seed_result.emplace_back(arm.name, std::move(result));
      }
      per_seed[si] = Value(std::move(seed_result));
    }
  } catch (const Interrupted& e) {
    if (ranks == 1) throw;
    stopped = e;
  }
  if (ranks > 1) end_over_ranks(*opt.world, per_seed, stopped, opt.rank_stop_wait_seconds);
  return per_seed;
}

}  // namespace

ReproduceOutput run_reproduce(const ReproduceOptions& options) {
  check_reproduce_options(options);
  const auto started = std::chrono::steady_clock::now();
  const Say say = [&](const std::string& s) {
    if (options.on_message) options.on_message(s);
  };
  // Over ranks, rank 0 reads first: it fills the tokenizer cache the others then read.
  Collectives* world = options.world && options.world->size() > 1 ? options.world : nullptr;
  if (world && world->rank() != 0) world->barrier();
  const Corpus corpus = prepare_data(options, say);
  if (world && world->rank() == 0) world->barrier();
  ReproduceOptions opt = options;
  opt.config.model.vocab = corpus.tokenizer.vocab_size();  // the model takes the tokenizer's size
  ArmStore store(opt.state_file, reproduce_resume_key(opt, corpus.tokenizer_sha256),
                 world ? world->rank() : 0, world ? world->size() : 1);
  const std::vector<Value> per_seed = run_all_arms(opt, corpus, store, say);
  if (!world || world->rank() == 0) store.finish(per_seed);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  ReproduceOutput out;
  out.result = assemble_result(opt, corpus, per_seed, wall);
  out.table = comparison_table(out.result);
  if (opt.write_files && (!world || world->rank() == 0)) {
    out.run_dir = opt.run_dir.empty() ? make_unique_dir(default_run_dir(opt.output_dir, opt.paper))
                                      : opt.run_dir;
    write_outputs(out.run_dir, opt, corpus, out.result);
  }
  return out;
}

}  // namespace dg
