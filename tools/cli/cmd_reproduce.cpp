// `depthgrad reproduce` and `depthgrad list`: flags -> ReproduceOptions -> run -> table and paths.
// Under mpirun/srun the paired protocol spreads its seeds over the ranks (rank 0 writes the run's
// files; every rank shows its own progress and keeps its own state file, step log and checkpoint).
#include <fmt/core.h>

#include <filesystem>
#include <set>
#include <utility>

#include "tensor/threads.h"
#include "tools/attnres/precision_compare.h"
#include "tools/attnres/reproduce.h"
#include "tools/attnres/scales.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_guard.h"
#include "tools/cli/preset_flag.h"
#include "tools/cli/progress.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run_config_flags.h"
#include "tools/cli/shared_flags.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/lm/data/data_files.h"
#include "train/stop.h"

namespace dg::cli {

int cmd_list(int argc, char** argv, int start) {
  Flags flags("list",
              "List the paper keys `depthgrad reproduce --paper` accepts, or with --modes the "
              "residual modes --mode and --pair accept.");
  flags.add_switch("modes", "list the residual modes, one line each, instead of the papers");
  if (!flags.parse(argc, argv, start)) {
    fmt::print("{}", flags.help());
    return 0;
  }
  if (flags.get_bool("modes")) {
    fmt::print("{}", residual_mode_table(""));
    return 0;
  }
  for (const PaperInfo& p : known_papers())
    fmt::print("{:20} {:16} {:12} {}\n", p.key, p.fidelity, p.arxiv_id, p.title);
  return 0;
}

static int reproduce_on_rank(int argc, char** argv, int start, World& world, bool& agreed);
namespace {
// reproduce --combine DIR,DIR,...: the cross-scale report of finished paired runs.
int combine_runs(const Flags& f) {
  for (const char* name : {"preset", "pair", "seeds", "steps", "state-file"})
    if (f.given(name))
      throw UsageError(
          fmt::format("--combine reads finished runs; --{} belongs to a run (drop it)", name));
  std::vector<std::string> inputs;
  const std::string list = f.get("combine");
  for (size_t b = 0; b <= list.size();) {
    const size_t e = std::min(list.find(',', b), list.size());
    if (e > b) inputs.push_back(list.substr(b, e - b));
    b = e + 1;
  }
  if (inputs.empty()) throw UsageError("--combine: expected run directories, got none");
  if (!f.given("output-dir"))
    throw UsageError("--combine: give --output-dir, the directory the cross-scale report goes to");
  // An earlier page in --output-dir is replaced only with --overwrite (tools/cli/output_guard.h).
  const std::string out = f.get("output-dir");
  const std::vector<std::string> files = {"scales.md", "scales.html", "scales.json", "scales.svg"};
  if (!f.get_bool("overwrite")) {
    const std::string refusal = replace_refusal(
        out, files, "a cross-scale report",
        "replace it with --overwrite (tools/results/run_scales.sh does), or give another "
        "--output-dir");
    if (!refusal.empty()) throw UsageError(refusal);
  }
  const ScalesReport report = combine_scales(inputs);
  remove_files(out, files);
  write_scales_report(report, out);
  fmt::print("{}", report.table);
  fmt::print("combined {} run(s): {}/scales.md, {}/scales.html, {}/scales.json, {}/scales.svg\n",
             report.rows.size(), out, out, out, out);
  return 0;
}

// reproduce --compare-precision F32,BF16: bf16 against float32 over two finished paired runs.
int compare_precision_runs(const Flags& f) {
  for (const char* name : {"preset", "pair", "seeds", "steps", "state-file", "combine"})
    if (f.given(name))
      throw UsageError(fmt::format(
          "--compare-precision reads finished runs; --{} belongs to a run (drop it)", name));
  const std::string list = f.get("compare-precision");
  const size_t comma = list.find(',');
  if (comma == std::string::npos || comma == 0 || comma + 1 == list.size() ||
      list.find(',', comma + 1) != std::string::npos)
    throw UsageError(fmt::format(
        "--compare-precision: expected FLOAT32_RUN,BF16_RUN (two run directories), got '{}'",
        list));
  if (!f.given("output-dir"))
    throw UsageError("--compare-precision: give --output-dir, the directory the report goes to");
  const std::string out = f.get("output-dir");
  const std::vector<std::string> files = {"precision.md", "precision.json"};
  if (!f.get_bool("overwrite")) {
    const std::string refusal =
        replace_refusal(out, files, "a precision comparison",
                        "replace it with --overwrite, or give another --output-dir");
    if (!refusal.empty()) throw UsageError(refusal);
  }
  const PrecisionReport report = compare_precisions(list.substr(0, comma), list.substr(comma + 1));
  remove_files(out, files);
  write_precision_report(report, out);
  fmt::print("{}", report.markdown);
  fmt::print("written: {}/precision.md, {}/precision.json\n", out, out);
  return 0;
}
}  // namespace

int cmd_reproduce(int argc, char** argv, int start) {
  World world;  // MPI when started by mpirun/srun, else one process
  return run_on_every_rank(world, "reproduce", [&](bool& agreed) {
    return reproduce_on_rank(argc, argv, start, world, agreed);
  });
}

namespace {

std::string reproduce_description() {
  return "Reproduce a paper's comparison. --protocol parity (default) is the reference run number "
         "for number;\n"
         "--protocol paired trains both arms on every seed and reports paired statistics;\n"
         "--pair A,B chooses its two residual modes (B − A is reported). --combine DIR,DIR,... "
         "writes one\n"
         "cross-scale page (scales.html, scales.md, scales.json, scales.svg) from finished paired\n"
         "runs into --output-dir; --compare-precision F32_RUN,BF16_RUN writes precision.md and\n"
         "precision.json (bf16 − float32, paired) from two finished paired runs.\n\n" +
         preset_help_text();
}

void declare_reproduce_flags(Flags& f) {
  f.add("paper", "rd-attnres", "paper key (see depthgrad list)")
      .add("protocol", "parity", "parity | paired")
      .add("pair", "block_attnres,rd_attnres",
           "paired: the two residual modes compared, baseline A then method B (any two of " +
               residual_mode_names() + ")")
      .add("combine", "",
           "comma-separated finished paired run directories (or result.json files): write the "
           "cross-scale report into --output-dir and exit")
      .add("compare-precision", "",
           "FLOAT32_RUN,BF16_RUN: two finished paired runs differing only in --precision; write "
           "precision.md and precision.json (bf16 − float32 validation NLL per arm, 95% CI) into "
           "--output-dir and exit");
  add_overwrite_flag(f, "with --combine or --compare-precision, the report in --output-dir");
  add_preset_flag(f);
  add_data_location_flags(f)
      .add("output-dir", "runs/reproductions", "where run directories are created")
      .add("seed", "42", "single seed (parity)")
      .add("seeds", "", "seed list, e.g. 1-10 or 1,2,5 (paired default: 1-5)");
  // The run's settings, with each protocol's value as its default; --eval and --train-tokens
  // are this command's names of data.eval_full and data.train_limit.
  add_run_config_flags(
      f, {{"parity", protocol_run_config("parity")}, {"paired", protocol_run_config("paired")}},
      {"dim", "layers", "heads", "kv-heads", "seq-len", "steps", "batch", "lr", "decay", "schedule",
       "warmup", "init", "precision", "detect-anomaly"},
      {{"warmup", "(default: 5% of the steps with cosine, else 0)"}})
      .add("eval", "", "reference | full (parity: reference; paired: full)")
      .add("train-tokens", "", "train ids used (parity: 120000; paired: 0 = all)");
  add_threads_flag(f, /*sized_to_run=*/true)
      .add("state-file", "",
           "JSON file of the finished arms, to resume a run where it stopped (default: "
           "state.json in the run directory)")
      .add("resume", "",
           "continue the run in this directory (its state.json and the checkpoint of the arm "
           "that was training); give the run's other flags as before")
      .add("rank-stop-wait", "300",
           "over MPI ranks: seconds a stopped rank waits for the others to stop too (they stop "
           "after their step, or after their arm when in its evaluation), then ends the job")
      .add("checkpoint-every", "200",
           "paired: also save the arm in training every this many steps, so that a killed run "
           "loses at most that many (0 = only when stopped by Ctrl-C or SIGTERM)")
      .add_switch("quiet", "no progress output");
}

// The paper, protocol, seeds and run from the flags (checked by the caller, which knows the ranks).
ReproduceOptions reproduce_options_from_flags(const Flags& f) {
  ReproduceOptions o;
  o.paper = f.get("paper");
  find_paper(o.paper);  // unknown keys fail before any work
  o.protocol = f.get("protocol");
  if (o.protocol != "parity" && o.protocol != "paired")
    throw UsageError(fmt::format("--protocol: expected parity or paired, got '{}'", o.protocol));
  const bool paired = o.protocol == "paired";
  if (f.given("seeds"))
    o.seeds = parse_seed_list(f.get("seeds"), "--seeds");
  else if (f.given("seed") || !paired)
    o.seeds = parse_seed_list(f.get("seed"), "--seed");
  else
    o.seeds = parse_seed_list("1-5", "--seeds");
  // The protocol's run, then every flag given (the flags' listed defaults are the protocol's).
  RunConfig& c = o.config = protocol_run_config(o.protocol);
  apply_preset_flag(f, c);  // the sizes; the protocol keeps its steps, schedule and data
  if (f.given("pair")) {
    try {
      o.pair = parse_reproduce_pair(f.get("pair"));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  apply_run_config_flags(f, c);
  // K/V heads follow the heads, the warm-up the schedule and steps, unless given.
  if (!f.given("kv-heads")) c.model.kv_heads = c.model.heads;
  if (!f.given("warmup"))
    c.training.schedule.warmup_steps =
        default_warmup_steps(c.training.schedule.kind, c.training.steps);
  c.training.schedule.total_steps = c.training.steps;
  if (f.given("eval")) {
    const std::string eval = f.get("eval");
    if (eval != "reference" && eval != "full")
      throw UsageError(fmt::format("--eval: expected reference or full, got '{}'", eval));
    c.data.eval_full = eval == "full";
  }
  if (f.given("train-tokens")) c.data.train_limit = f.get_int("train-tokens");
  o.state_file = f.get("state-file");
  return o;
}

// The run folder: the --resume one, or a new timestamped folder under --output-dir (rank 0's,
// over ranks). It keeps the finished arms (state.json; over N ranks also state.json.rank<r>,
// each rank's own) and the arms in training (checkpoints/seed-<s>-<arm>.safetensors).
void place_run(const Flags& f, World& world, ReproduceOptions& o) {
  const bool writes = world.rank() == 0;
  if (f.given("resume")) {
    o.run_dir = f.get("resume");
    while (o.run_dir.size() > 1 && o.run_dir.back() == '/') o.run_dir.pop_back();
    if (!dir_exists(o.run_dir))
      throw std::runtime_error(fmt::format("--resume: {} does not exist", o.run_dir));
  } else {
    o.run_dir = default_run_dir(o.output_dir, o.paper);
    if (writes) o.run_dir = make_unique_dir(o.run_dir);  // exclusive: never shared with another run
    // Over ranks, rank 0's folder is everyone's (its name has the time of day in it).
    if (world.size() > 1) o.run_dir = world.collectives().all_gather(o.run_dir).at(0);
  }
  o.state_file = f.given("state-file") ? f.get("state-file") : o.run_dir + "/state.json";
  o.arm_checkpoint_dir = o.run_dir + "/checkpoints";
  o.arm_checkpoint_every = f.get_int("checkpoint-every");
  o.rank_stop_wait_seconds = f.get_double("rank-stop-wait");
  if (writes) make_dirs(o.run_dir);
}

// This rank's step log and progress line. A new run starts its step log empty. A resumed one
// opens it at its first step, once its state file and checkpoint have been accepted (a refused
// resume leaves the log as it was). Over ranks each rank logs the steps of its own arms: rank 0
// in steps.jsonl, rank r in steps.rank<r>.jsonl (after a change of rank count one arm's lines
// may span two of them). Every rank shows its progress and its arms' results, its lines prefixed
// with its rank.
struct ReproduceProgress {
  std::string step_log, rank_prefix;
  bool resuming = false;
  Progress progress;
  std::set<std::pair<uint64_t, std::string>> arms_logged;  // (seed, arm) seen by this process

  ReproduceProgress(const Flags& f, World& world, const ReproduceOptions& o)
      : step_log(o.run_dir + (world.rank() == 0
                                  ? "/steps.jsonl"
                                  : fmt::format("/steps.rank{}.jsonl", world.rank()))),
        rank_prefix(world.size() > 1 ? fmt::format("[rank {}/{}] ", world.rank(), world.size())
                                     : ""),
        resuming(f.given("resume")),
        progress(f.get_bool("quiet"), resuming ? "" : step_log) {}

  // In a resumed run an arm's first step here is where its checkpoint left off (or step 0): the
  // lines the stopped run logged for it from `from_step` on are dropped from this process's log,
  // everything else kept. (After a change of rank count the arm may have such lines in another
  // rank's log, which this process does not rewrite.)
  void restart_arm_log(const std::string& arm, uint64_t seed, int64_t from_step) {
    progress.close_log();
    keep_log_lines(step_log, [&](const json::Value& line) {
      if (!line.is_object()) return false;
      const json::Value *a = line.find("arm"), *s = line.find("seed"), *t = line.find("step");
      if (!a || !s || !t || !a->is_string() || !s->is_number() || !t->is_number()) return false;
      const bool this_arm = a->as_string() == arm && s->as_double() == static_cast<double>(seed);
      return !this_arm || t->as_double() < static_cast<double>(from_step);
    });
    progress.open_log(step_log, true);
  }

  // Sets o.on_message and o.on_step: every step on the progress line and in the step log.
  void follow(ReproduceOptions& o, World& world) {
    const int64_t steps = o.config.training.steps;
    // Each rank shows its own share: seeds r, r + N, r + 2N, ... of the list (all in one process).
    const size_t ranks = static_cast<size_t>(world.size()),
                 rank = static_cast<size_t>(world.rank());
    const size_t my_seeds = (o.seeds.size() + ranks - 1 - rank) / ranks;
    const double total_steps = static_cast<double>(my_seeds * 2 * steps);
    o.on_message = [this](const std::string& line) { progress.message(rank_prefix + line); };
    o.on_step = [this, &o, steps, ranks, total_steps](const std::string& arm, uint64_t seed,
                                                      size_t si, size_t n, const StepLog& log) {
      const double done = static_cast<double>(
          (si / ranks * 2 + (arm == o.pair[1].name ? 1 : 0)) * steps + log.step + 1);
      progress.step(fmt::format("{}[seed {} ({}/{}) {}]", rank_prefix, seed, si + 1, n, arm),
                    log.step, log.steps, log.loss, log.tokens_per_second, done / total_steps);
      if (resuming && arms_logged.emplace(seed, arm).second) restart_arm_log(arm, seed, log.step);
      json::Value j;
      j["arm"] = arm;
      j["seed"] = static_cast<int64_t>(seed);
      j["step"] = log.step;
      j["loss"] = log.loss;
      j["grad_norm"] = log.grad_norm;
      j["clipped"] = log.clipped;
      j["lr"] = log.lr;
      j["seconds"] = log.seconds;
      j["tokens_per_second"] = log.tokens_per_second;
      progress.log_json(json::dump(j));
    };
  }
};

// No half-written run directories: a run that failed before any arm finished leaves nothing;
// one with finished arms (or one being resumed) keeps them for --resume. Over ranks, another
// rank's own state file or saved arm counts too.
void remove_run_without_work(const ReproduceOptions& o) {
  const auto keeps_work = [&] {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(o.run_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("state.json", 0) == 0) return true;
    }
    return !std::filesystem::is_empty(o.arm_checkpoint_dir, ec) && !ec;
  };
  if (!keeps_work()) {
    std::error_code ec;
    std::filesystem::remove_all(o.run_dir, ec);
  }
}

// Runs the reproduction; a stop request prints how to resume it. Rank 0 prints the table and the
// report's paths.
int run_and_report(int argc, char** argv, World& world, ReproduceOptions& o,
                   ReproduceProgress& rp) {
  const bool writes = world.rank() == 0;
  ReproduceOutput out;
  try {
    out = run_reproduce(o);
  } catch (const Interrupted& e) {
    rp.progress.finish();
    if (world.size() == 1 || writes)
      fmt::print(stderr,
                 "depthgrad reproduce: {}; finished arms are in {}{}, the arm in training is "
                 "saved in {}/\nresume with:\n  {}\n",
                 e.what(), o.state_file, world.size() > 1 ? " and its .rank<r> files" : "",
                 o.arm_checkpoint_dir,
                 // (over ranks: with mpirun's own flags as before, and any number of ranks)
                 (world.size() > 1 ? fmt::format("mpirun -np {} ", world.size()) : "") +
                     resume_command(argc, argv, {"resume", "output-dir"}, {{"resume", o.run_dir}}));
    else
      fmt::print(stderr, "depthgrad reproduce: rank {} of {}: {}\n", world.rank(), world.size(),
                 e.what());
    std::fflush(stderr);
    return e.exit_code();
  } catch (...) {
    rp.progress.finish();
    if (writes && !rp.resuming) remove_run_without_work(o);
    throw;
  }
  rp.progress.finish();
  if (!writes) return 0;
  std::error_code ignored;
  std::filesystem::remove(o.arm_checkpoint_dir, ignored);  // empty once every arm is done
  fmt::print("{}", out.table);
  fmt::print("wall time: {:.2f} s\n", out.result.at("runtime").at("wall_seconds").as_double());
  fmt::print("{}: {}/report.md\n", o.paper, out.run_dir);
  fmt::print("report: {}/report.html\n", out.run_dir);
  return 0;
}

}  // namespace

static int reproduce_on_rank(int argc, char** argv, int start, World& world, bool& agreed) {
  Flags f("reproduce", reproduce_description());
  declare_reproduce_flags(f);
  if (!f.parse(argc, argv, start)) {
    if (world.rank() == 0) fmt::print("{}", f.help());
    return 0;
  }
  if (f.given("combine")) {
    if (world.size() > 1) throw UsageError("--combine: one process reads the runs (not mpirun)");
    return combine_runs(f);
  }
  if (f.given("compare-precision")) {
    if (world.size() > 1)
      throw UsageError("--compare-precision: one process reads the runs (not mpirun)");
    return compare_precision_runs(f);
  }
  check_same_flags(world, f);  // every rank must be asked the same before anything is refused
  agreed = true;
  if (f.get_bool("overwrite"))
    throw UsageError(
        "--overwrite: only --combine and --compare-precision write into --output-dir itself (a "
        "run goes to a new timestamped folder under it)");
  ReproduceOptions o = reproduce_options_from_flags(f);
  if (world.size() > 1) o.world = &world.collectives();
  // e.g. --heads 5 with --dim 64, or more ranks than seeds: refused before the data is read, as a
  // usage error (exit 2), once every rank knows the layout
  as_usage_error([&] { check_reproduce_options(o); });
  const DataLocation data = resolve_data_location(f);
  o.data_dir = data.data_dir;
  o.cache_dir = data.cache_dir;
  o.output_dir = f.get("output-dir");
  // The thread count: --threads, the environment, else sized to the run (one per GFLOP a step).
  const ThreadChoice thread_choice = apply_threads_for_run(f, o.config);
  o.threads = thread_choice.threads;
  place_run(f, world, o);
  install_stop_handlers();
  ReproduceProgress rp(f, world, o);
  if (world.rank() == 0)
    rp.progress.message(
        fmt::format("depthgrad reproduce --paper {} --protocol {}: {} vs {}{}, {} seed(s), {} "
                    "steps per arm, {}; data {}",
                    o.paper, o.protocol, o.pair[0].name, o.pair[1].name,
                    o.config.preset.empty() ? "" : ", preset " + o.config.preset, o.seeds.size(),
                    o.config.training.steps, thread_choice.describe(), o.data_dir));
  if (world.size() > 1 && world.rank() == 0)
    rp.progress.message(
        fmt::format("seeds spread over {} MPI ranks (the i-th seed, from 0, on rank i mod {})",
                    world.size(), world.size()));
  rp.follow(o, world);
  return run_and_report(argc, argv, world, o, rp);
}

}  // namespace dg::cli
