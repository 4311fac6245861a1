// `depthgrad bench`: training speed per (config, thread count, matmul precision), optionally
// against the PyTorch reference (tools/torch_reference.py) and against MPI ranks. Every
// measurement runs in a fresh process, because peak resident memory (VmHWM, ru_maxrss) is a
// process-lifetime figure: this command re-runs itself as `depthgrad bench --one CONFIG --threads
// N --precision P` (under mpirun for --mpi; the torch script once per measurement) and collects
// the JSON each prints. It does not time anything itself; tools/attnres/bench.h does.
#include <fcntl.h>
#include <fmt/core.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "tensor/gemm_kernels.h"
#include "tensor/threads.h"
#include "tools/attnres/bench.h"
#include "tools/attnres/bench_generate.h"
#include "tools/attnres/reproduce.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_guard.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run_config_flags.h"
#include "tools/cli/runtime_files.h"
#include "train/io/json.h"
#include "train/io/run_record.h"
#include "train/lm/run_config.h"

extern char** environ;

namespace dg::cli {

namespace {

// results holds `rounds` sweeps of `per_round` measurements in the same order. Per position, the
// measurement with the median tokens/s (the lower middle for an even count) stands for all, with
// its peak memory replaced by the median peak memory.
std::vector<BenchResult> median_results(const std::vector<BenchResult>& results, size_t per_round) {
  std::vector<BenchResult> out;
  if (per_round == 0) return out;
  const size_t rounds = results.size() / per_round;
  for (size_t i = 0; i < per_round; ++i) {
    std::vector<const BenchResult*> runs;
    std::vector<int64_t> rss;
    for (size_t r = 0; r < rounds; ++r) {
      runs.push_back(&results[r * per_round + i]);
      rss.push_back(results[r * per_round + i].peak_rss_kib);
    }
    std::sort(runs.begin(), runs.end(), [](const BenchResult* a, const BenchResult* b) {
      return a->tokens_per_second < b->tokens_per_second;
    });
    std::sort(rss.begin(), rss.end());
    BenchResult m = *runs[(rounds - 1) / 2];
    m.peak_rss_kib = rss[(rounds - 1) / 2];
    out.push_back(m);
  }
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Runs argv[0] (searched on PATH when it has no slash) with argv (no shell) in this environment
// plus `env` ("NAME=value", replacing NAME), stdout captured, stderr passed through (or
// discarded). Returns stdout; throws naming the program when it cannot start or exits non-zero.
std::string run_capture(const std::vector<std::string>& args, bool quiet_stderr = false,
                        const std::vector<std::string>& env = {}) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("bench: pipe() failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  if (quiet_stderr) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e), name = entry.substr(0, entry.find('='));
    if (std::none_of(env.begin(), env.end(),
                     [&](const std::string& x) { return x.rfind(name + "=", 0) == 0; }))
      env_strings.push_back(entry);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error(fmt::format("bench: cannot run {}: {}", args[0], std::strerror(rc)));
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, size_t(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string command;
  for (const std::string& e : env) command += (command.empty() ? "" : " ") + e;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("bench: `{}` failed ({})", command,
                                         WIFEXITED(status)
                                             ? fmt::format("exit {}", WEXITSTATUS(status))
                                             : fmt::format("signal {}", WTERMSIG(status))));
  return out;
}

// The last line of a child's stdout that is a JSON object.
json::Value last_json_line(const std::string& out, const std::string& source) {
  std::stringstream ss(out);
  std::string line, last;
  while (std::getline(ss, line))
    if (!line.empty() && line[0] == '{') last = line;
  if (last.empty()) throw std::runtime_error(fmt::format("{}: printed no JSON result", source));
  return json::parse(last, source);
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("bench: cannot resolve /proc/self/exe to re-run itself");
  return p.string();
}

// The residual modes tools/torch_reference.py builds (its MODES): the paper forms have no torch
// twin, and a new mode has none until the script learns it.
bool torch_reference_has(ResidualMode mode) {
  const std::string name = residual_mode_name(mode);
  return name == "standard" || name == "block_attnres" || name == "rd_attnres";
}

// --torch-script, else the torch_reference.py shipped with this program
// (tools/cli/runtime_files.h).
std::string find_torch_script(const std::string& flag_value) {
  if (!flag_value.empty()) {
    if (!std::filesystem::exists(flag_value))
      throw UsageError(fmt::format("--torch-script: {} does not exist", flag_value));
    return flag_value;
  }
  return runtime_file("torch_reference.py", "pass --torch-script PATH");
}

// --compare-torch needs a Python that imports torch; say which package provides it.
void check_torch_importable(const std::string& python) {
  try {
    run_capture({python, "-c", "import torch"}, /*quiet_stderr=*/true);
  } catch (const std::exception&) {
    throw UsageError(fmt::format(
        "--compare-torch: `{} -c 'import torch'` fails: PyTorch is not installed for that Python. "
        "On Debian: sudo apt-get install python3-torch (for /usr/bin/python3), or pass --python "
        "PATH of a Python that has torch",
        python));
  }
}

struct Plan {
  std::vector<std::string> configs;
  std::vector<int> threads;
  std::vector<MatmulPrecision> precisions;
  ResidualMode mode = residual_mode("rd_attnres");
  int64_t accum = 1;
  int64_t warmup = -1, steps = -1;  // -1: the config's default
};

BenchSpec spec_for(const Plan& plan, const std::string& config,
                   MatmulPrecision precision = MatmulPrecision::float32) {
  BenchSpec s = bench_spec(config, plan.mode);
  s.run.training.precision = precision;
  s.run.training.accum = plan.accum;
  if (plan.warmup >= 0) s.warmup = plan.warmup;
  if (plan.steps >= 0) s.timed = plan.steps;
  return s;
}

struct CheckRow {
  std::string config;
  int64_t dg_params = 0, torch_params = 0;
  double dg_loss = 0, torch_loss = 0;
  std::vector<double> dg_after, torch_after;
  double max_diff = 0;
  bool ok = false;
};

constexpr double kCheckTolerance = 1e-4;

CheckRow run_check(const std::string& python, const std::string& script, const std::string& dir,
                   const BenchSpec& spec) {
  CheckResult dg = write_check(dir, spec);
  const std::string stem = dir + "/" + spec.name;
  json::Value t = last_json_line(run_capture({python, script, "--check", stem + ".safetensors",
                                              "--tokens", stem + ".tokens.json", "--json"}),
                                 "torch_reference.py --check");
  CheckRow row;
  row.config = spec.name;
  row.dg_params = dg.parameters;
  row.torch_params = t.at("parameters").as_int();
  row.dg_loss = dg.loss;
  row.torch_loss = t.at("loss").as_double();
  row.dg_after = dg.losses_after;
  for (const json::Value& x : t.at("losses_after_steps").as_array())
    row.torch_after.push_back(x.as_double());
  row.max_diff = std::fabs(row.dg_loss - row.torch_loss);
  bool same_length = row.dg_after.size() == row.torch_after.size();
  for (size_t i = 0; same_length && i < row.dg_after.size(); ++i)
    row.max_diff = std::max(row.max_diff, std::fabs(row.dg_after[i] - row.torch_after[i]));
  row.ok = same_length && row.dg_params == row.torch_params && row.max_diff <= kCheckTolerance;
  return row;
}

std::string check_table(const std::vector<CheckRow>& rows) {
  std::string t = fmt::format("{:<6} {:>12} {:>12} {:>12} {:>12} {:>10}  {}\n", "config",
                              "dg params", "torch params", "dg loss", "torch loss", "max |Δ|",
                              "losses after 1..n AdamW steps (dg / torch)");
  for (const CheckRow& r : rows) {
    std::string after;
    for (size_t i = 0; i < r.dg_after.size() && i < r.torch_after.size(); ++i)
      after += fmt::format("{}{:.6f}/{:.6f}", i ? "  " : "", r.dg_after[i], r.torch_after[i]);
    t += fmt::format("{:<6} {:>12} {:>12} {:>12.6f} {:>12.6f} {:>10.2e}  {}  {}\n", r.config,
                     r.dg_params, r.torch_params, r.dg_loss, r.torch_loss, r.max_diff, after,
                     r.ok ? "ok" : "MISMATCH");
  }
  return t;
}

json::Value check_json(const CheckRow& r) {
  json::Value v;
  v["config"] = r.config;
  v["depthgrad_parameters"] = r.dg_params;
  v["torch_parameters"] = r.torch_params;
  v["depthgrad_loss"] = r.dg_loss;
  v["torch_loss"] = r.torch_loss;
  json::Array a, b;
  for (double x : r.dg_after) a.emplace_back(x);
  for (double x : r.torch_after) b.emplace_back(x);
  v["depthgrad_losses_after_steps"] = json::Value(std::move(a));
  v["torch_losses_after_steps"] = json::Value(std::move(b));
  v["max_abs_difference"] = r.max_diff;
  v["tolerance"] = kCheckTolerance;
  v["ok"] = r.ok;
  return v;
}

// ---- bench_on_rank's steps, in the order it takes them ----

// "micro 3, mini 3, small 3, base 2": the preset table's warm-up (or timed) steps.
std::string bench_steps(bool warmup) {
  std::string out;
  for (const RunPreset& p : run_presets())
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", p.name,
                       warmup ? p.bench_warmup : p.bench_timed);
  return out;
}

std::string preset_name_list() {
  std::string names;
  for (const std::string& n : run_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// What `depthgrad bench --help` says before its flags.
std::string bench_description() {
  return "Training speed: tokens/s over full steps (forward, backward, clip, AdamW), median of "
         "timed steps after\n"
         "warm-up; ms per step; peak resident memory; time by op family; GFLOP/s of the step "
         "(6·params·tokens plus\n"
         "attention) as a fraction of the machine's peak in the step's matmul precision. Each "
         "(config, threads,\n"
         "precision) runs in a fresh process. The output opens with the CPU, its instruction "
         "sets and the GEMM\n"
         "kernels chosen (OpenBLAS core loaded and used, and why; the bf16 kernel or why there is "
         "none).\n\n"
         "peak: the best kernel of the precision, timed in the row's process at its thread count, "
         "on a square\n"
         "2048 GEMM (column \"peak\", the machine's limit) and on the model's largest GEMM "
         "(column \"GEMM pk\",\n"
         "the best its shapes allow). float32: max of OpenBLAS cblas_sgemm (the core depthgrad "
         "chose) and oneDNN\n"
         "dnnl_sgemm; bf16: max of depthgrad's bf16 gemm (rounding to bf16 included) and a "
         "oneDNN matmul on bf16\n"
         "operands. The \"frac\" beside each is the step's GFLOP/s over that peak. --json also "
         "gives, for float32\n"
         "rows, OpenBLAS's cblas_sgemm alone on the model's largest GEMM (sgemm_gflops) and the "
         "step's GFLOP/s\n"
         "over it (sgemm_fraction).\n\n"
         "--compare-torch also runs tools/torch_reference.py the same way (float32, and bf16 "
         "autocast for\n"
         "--precision bf16), after checking that both models agree (parameter counts, and losses "
         "on depthgrad's\n"
         "weights to 1e-4). When depthgrad moved OpenBLAS to another core than it loaded, a "
         "float32 torch run\n"
         "with OPENBLAS_CORETYPE set to that core follows (\"torch+core\"). --mpi times 2 MPI "
         "ranks x 1 thread\n"
         "against 1 process x 2 threads at the same global batch (ranks x batch = accum 2 x "
         "batch).\n\n"
         "configs (the presets of train, reproduce and evolve):\n" +
         run_preset_help();
}

void declare_bench_flags(Flags& f, const std::string& preset_names) {
  f.add("configs", "micro,small,base",
        "configs to run, comma-separated: presets " + preset_names + " (listed above)")
      .add("threads", "1,2", "thread counts (comma-separated; with --one, a single count)")
      .add("precision", "float32",
           "matmul precisions, comma-separated: float32, bf16 (bf16 needs AMX-BF16 or "
           "AVX512_BF16; with --one, a single one)");
  // model.mode and training.accum, from the settings table
  add_run_config_flags(
      f, {{"", RunConfig{}}}, {"mode", "accum"},
      {{"accum",
        "(default: 1; for every measurement; --mpi's one process runs 2x this against 2 ranks)"}});
  // --warmup and --steps are the benchmark's untimed and timed steps, not training settings.
  f.add("warmup", "", "untimed warm-up steps (default: the preset's, " + bench_steps(true) + ")")
      .add("steps", "", "timed steps (default: the preset's, " + bench_steps(false) + ")")
      .add_switch("json", "print one JSON document instead of tables")
      .add_switch("compare-torch", "also time the PyTorch reference and print the ratios")
      .add("check-configs", "micro,small",
           "configs of the equivalence check run by --compare-torch (empty: none)")
      .add("python", "/usr/bin/python3", "Python with torch for --compare-torch")
      .add("torch-script", "",
           "path of torch_reference.py (default: " + runtime_files_dir() +
               "/torch_reference.py, the copy this program ships: <prefix>/share/depthgrad/ "
               "installed, the source tree's tools/ in its build folder)")
      .add("write-check", "",
           "write equivalence-check files (weights, token batch, losses) for --configs into DIR "
           "and exit")
      .add_switch("overwrite",
                  "with --write-check, replace the files of an earlier check in DIR (without it, "
                  "they are refused)")
      .add_switch("no-profile",
                  "do not time op families (the timers cost about one clock read per op)")
      .add_switch("no-peak", "skip the GEMM peak measurements (frac columns empty)")
      .alias("no-sgemm")
      .add_switch(
          "mpi",
          "also time 2 MPI ranks x 1 thread against 1 process x 2 threads with twice --accum, "
          "per config and precision (needs a depthgrad built with MPI)")
      .add("mpirun", "mpiexec",
           "Open MPI launcher for --mpi (run as `MPIRUN -np 2 --bind-to none`, plus "
           "--allow-run-as-root for root)")
      .add_switch("verbose", "show every step of every measurement on stderr")
      .add("repeat", "1",
           "run the whole sweep this many times (fresh processes each, depthgrad and torch "
           "interleaved) and report per (config, threads) the invocation with the median tokens/s, "
           "with the median peak memory")
      .add_switch("generate",
                  "time greedy generation with the K/V cache instead of training, at 1 thread "
                  "(or --threads N), against the bound of reading the matmul weights once per "
                  "token at the measured memory bandwidth")
      .add("one", "",
           "internal: measure CONFIG in this process and print its JSON (what bench runs per "
           "measurement)");
}

// The flags' plan, every value checked before any work.
struct BenchRun {
  Plan plan;
  bool verbose = false;
  int64_t repeats = 1;
};

BenchRun parse_bench_run(const Flags& f, const std::string& preset_names) {
  BenchRun run;
  Plan& plan = run.plan;
  plan.configs = split_list(f.get("configs"));
  if (plan.configs.empty()) throw UsageError("--configs: expected at least one of " + preset_names);
  for (const std::string& c : split_list(f.get("configs") + "," + f.get("check-configs"))) {
    try {
      bench_spec(c);  // unknown names fail before any work
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  for (const std::string& t : split_list(f.get("threads")))
    plan.threads.push_back(parse_threads(t, "--threads"));
  if (plan.threads.empty()) throw UsageError("--threads: expected at least one thread count");
  try {
    plan.mode = parse_residual_mode(f.get("mode"));
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("--mode: {}", e.what()));
  }
  for (const std::string& p : split_list(f.get("precision")))
    plan.precisions.push_back(parse_precision_flag(p));
  if (plan.precisions.empty()) throw UsageError("--precision: expected float32 and/or bf16");
  plan.accum = f.get_int("accum");
  if (f.given("warmup")) plan.warmup = f.get_int("warmup");
  if (f.given("steps")) plan.steps = f.get_int("steps");
  if (f.given("warmup") && plan.warmup < 0) throw UsageError("--warmup: must be >= 0");
  if (f.given("steps") && plan.steps < 1) throw UsageError("--steps: must be >= 1");
  run.verbose = f.get_bool("verbose");
  run.repeats = f.get_int("repeat");
  if (run.repeats < 1 || run.repeats > 100) throw UsageError("--repeat: expected 1 to 100");
  return run;
}

// --one CONFIG: one measurement in this process (over the ranks under mpirun), printed as JSON or
// tables.
int measure_in_this_process(const Flags& f, const BenchRun& run, World& world) {
  const Plan& plan = run.plan;
  if (plan.threads.size() != 1) throw UsageError("--one: give exactly one --threads count");
  if (plan.precisions.size() != 1) throw UsageError("--one: give exactly one --precision");
  // The peaks, the model and the trainer's steps (in training.precision) all in this precision.
  const MatmulPrecisionScope precision(plan.precisions[0]);
  BenchOptions o;
  o.threads = plan.threads[0];
  if (world.size() > 1) o.world = &world.collectives();
  o.profile = !f.get_bool("no-profile");
  o.measure_peak = !f.get_bool("no-peak");
  if (run.verbose)
    o.on_message = [](const std::string& line) { fmt::print(stderr, "  {}\n", line); };
  BenchResult r = run_bench(spec_for(plan, f.get("one"), plan.precisions[0]), o);
  if (world.rank() != 0) return 0;
  if (world.size() > 1)
    fmt::print(stderr,
               "{} ranks x {} thread(s), global batch {} ({} per rank); tokens/s over all ranks\n",
               world.size(), o.threads, world.size() * r.batch, r.batch);
  if (f.get_bool("json"))
    fmt::print("{}\n", json::dump(r.to_json()));
  else
    fmt::print("{}\n{}\n{}{}", machine_text(), bench_table({r}), peak_table({r}),
               r.profiled ? breakdown_table({r}) : "");
  return 0;
}

// --generate: generation speed of every config, in this process.
int time_generation(const Flags& f, const Plan& plan) {
  const int threads = f.given("threads") ? plan.threads.at(0) : 1;
  if (f.given("threads") && plan.threads.size() != 1)
    throw UsageError("--generate: give one --threads count (default 1)");
  if (f.get_bool("compare-torch"))
    throw UsageError("--generate: --compare-torch times training only");
  set_threads(threads);
  fmt::print(stderr, "measuring the one-thread read bandwidth (512 MiB buffer, best of 5) ...\n");
  const double bandwidth = measure_read_bandwidth_gbs();
  std::vector<GenerateBenchRow> rows;
  for (const std::string& c : plan.configs) {
    fmt::print(stderr, "generation {} threads={} ...\n", c, threads);
    rows.push_back(bench_generation(spec_for(plan, c), bandwidth));
  }
  if (f.get_bool("json")) {
    json::Value v = generate_bench_json(rows, bandwidth);
    v["threads"] = threads;
    fmt::print("{}\n", json::dump(v));
  } else {
    fmt::print("{}", generate_bench_table(rows, bandwidth));
  }
  return 0;
}

// --write-check DIR: the equivalence-check files of every config, and nothing else.
int write_check_files(const Flags& f, const Plan& plan) {
  const std::string dir = f.get("write-check");
  std::vector<std::string> files;
  for (const std::string& c : plan.configs)
    files.insert(files.end(), {c + ".safetensors", c + ".tokens.json"});
  const std::string refusal =
      f.get_bool("overwrite")
          ? ""
          : replace_refusal(dir, files, "equivalence-check files",
                            "replace them with --overwrite, or give another --write-check DIR");
  if (!refusal.empty()) throw UsageError(refusal);
  remove_files(dir, files);
  for (const std::string& c : plan.configs) {
    CheckResult r = write_check(f.get("write-check"), spec_for(plan, c));
    std::string after;
    for (double l : r.losses_after) after += fmt::format(" {:.6f}", l);
    fmt::print(
        "{}: {} parameters, loss {:.6f}; after AdamW steps:{}\n  {}/{}.safetensors, "
        "{}/{}.tokens.json\n",
        c, r.parameters, r.loss, after, f.get("write-check"), c, f.get("write-check"), c);
  }
  return 0;
}

// The PyTorch reference of --compare-torch: which Python runs which script (compare false
// without the flag).
struct TorchReference {
  bool compare = false;
  std::string python, script;
};

TorchReference torch_reference_for(const Flags& f, const Plan& plan) {
  TorchReference t;
  t.compare = f.get_bool("compare-torch");
  if (!t.compare) return t;
  if (plan.accum != 1)
    throw UsageError("--compare-torch: the torch reference steps without accumulation (--accum 1)");
  if (!torch_reference_has(plan.mode))
    throw UsageError(fmt::format("--compare-torch: the torch reference has no {} model",
                                 residual_mode_name(plan.mode)));
  t.python = f.get("python");
  t.script = find_torch_script(f.get("torch-script"));
  check_torch_importable(t.python);
  return t;
}

void note(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// The equivalence check that comes before any timing with --compare-torch: its table is printed
// (without --json), and a mismatch stops the run.
std::vector<CheckRow> run_equivalence_checks(const Flags& f, const Plan& plan,
                                             const TorchReference& torch) {
  std::vector<CheckRow> checks;
  if (!torch.compare || split_list(f.get("check-configs")).empty()) return checks;
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("depthgrad-bench-check-{}", getpid()))
          .string();
  try {
    for (const std::string& c : split_list(f.get("check-configs"))) {
      note(fmt::format("equivalence check: {} ...", c));
      checks.push_back(run_check(torch.python, torch.script, dir, spec_for(plan, c)));
    }
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
  if (!f.get_bool("json"))
    fmt::print(
        "equivalence check (random weights N(0, 1/fan_in), one batch of random tokens):\n{}\n",
        check_table(checks));
  std::fflush(stdout);  // before the progress lines on stderr
  for (const CheckRow& r : checks)
    if (!r.ok)
      throw std::runtime_error(
          fmt::format("the depthgrad and torch models differ on {}: parameters {} vs {}, largest "
                      "loss difference {:.3e} (tolerance {:g})",
                      r.config, r.dg_params, r.torch_params, r.max_diff, kCheckTolerance));
  return checks;
}

// The command line of one `depthgrad bench --one` measurement.
std::vector<std::string> one_args(const Flags& f, const std::string& config, const BenchSpec& spec,
                                  int threads, MatmulPrecision p, int64_t accum) {
  return std::vector<std::string>{self_exe(),    "bench",
                                  "--one",       config,
                                  "--threads",   std::to_string(threads),
                                  "--precision", precision_name(p),
                                  "--accum",     std::to_string(accum),
                                  "--mode",      f.get("mode"),
                                  "--warmup",    std::to_string(spec.warmup),
                                  "--steps",     std::to_string(spec.timed),
                                  "--json"};
}

// torch+core: torch with OPENBLAS_CORETYPE set to the core depthgrad moved OpenBLAS onto, when it
// moved it (torch's float32 matmuls run on the same system OpenBLAS; its bf16 ones on oneDNN).
bool torch_needs_same_core(const TorchReference& torch) {
  const GemmKernelChoice& blas = select_gemm_kernels();
  return torch.compare && blas.blas_core != blas.blas_core_loaded;
}

// Every invocation, in order; with --repeat, each position's median once collapsed.
struct Sweep {
  std::vector<BenchResult> dg_results, torch_results;
  std::vector<std::pair<size_t, size_t>> pairs;  // (depthgrad, torch) of the first round
};

// One `depthgrad bench --one` in a fresh process.
BenchResult measure_depthgrad(const Flags& f, const BenchRun& run, const std::string& config,
                              const BenchSpec& spec, int threads, MatmulPrecision prec,
                              const std::string& what) {
  std::vector<std::string> args = one_args(f, config, spec, threads, prec, run.plan.accum);
  if (f.get_bool("no-profile")) args.push_back("--no-profile");
  if (f.get_bool("no-peak")) args.push_back("--no-peak");
  if (run.verbose) args.push_back("--verbose");
  note(
      fmt::format("depthgrad  {}: {} warm-up + {} timed steps ...", what, spec.warmup, spec.timed));
  BenchResult d = BenchResult::from_json(last_json_line(run_capture(args), "depthgrad bench --one"),
                                         "depthgrad bench --one");
  note(fmt::format("  {:.0f} tokens/s, {:.1f} ms/step", d.tokens_per_second,
                   d.median_step_seconds * 1e3));
  return d;
}

// One run of the torch reference beside depthgrad's measurement `d` of the same row; same_core
// sets OPENBLAS_CORETYPE to depthgrad's core.
BenchResult measure_torch(const Flags& f, const BenchRun& run, const TorchReference& torch,
                          const std::string& config, const BenchSpec& spec, int threads,
                          MatmulPrecision prec, const std::string& what, bool same_core,
                          const BenchResult& d) {
  std::vector<std::string> targs{torch.python,  torch.script,
                                 "--config",    config,
                                 "--threads",   std::to_string(threads),
                                 "--precision", precision_name(prec),
                                 "--mode",      f.get("mode"),
                                 "--warmup",    std::to_string(spec.warmup),
                                 "--steps",     std::to_string(spec.timed),
                                 "--json"};
  if (run.verbose) targs.push_back("--verbose");
  std::vector<std::string> env;
  if (same_core) env.push_back("OPENBLAS_CORETYPE=" + select_gemm_kernels().blas_core);
  note(fmt::format("torch{} {}: {} warm-up + {} timed steps ...", same_core ? "+core" : "     ",
                   what, spec.warmup, spec.timed));
  BenchResult tr = BenchResult::from_json(
      last_json_line(run_capture(targs, false, env), "torch_reference.py"), "torch_reference.py");
  tr.blas_core_forced = same_core;
  // The peaks are properties of the machine, thread count and precision: torch's fractions use
  // those measured in depthgrad's process for the same row.
  tr.gemm = d.gemm;
  tr.peak = d.peak;
  tr.gemm_peak = d.gemm_peak;
  tr.sgemm_gflops = d.sgemm_gflops;
  auto over = [&](double peak) { return peak > 0 ? tr.achieved_gflops / peak : 0.0; };
  tr.peak_fraction = over(tr.peak.gflops);
  tr.gemm_peak_fraction = over(tr.gemm_peak.gflops);
  tr.sgemm_fraction = over(tr.sgemm_gflops);
  note(fmt::format("  {:.0f} tokens/s, {:.1f} ms/step (OpenBLAS core {})", tr.tokens_per_second,
                   tr.median_step_seconds * 1e3, tr.blas_core.empty() ? "?" : tr.blas_core));
  if (tr.parameters != d.parameters)
    throw std::runtime_error(
        fmt::format("{}: torch has {} parameters, depthgrad {}: the configs "
                    "differ",
                    config, tr.parameters, d.parameters));
  return tr;
}

// The measurements, one process each; with --repeat the whole sweep again.
Sweep run_measurements(const Flags& f, const BenchRun& run, const TorchReference& torch) {
  const Plan& plan = run.plan;
  const bool torch_same_core = torch_needs_same_core(torch);
  Sweep s;
  for (int64_t rep = 0; rep < run.repeats; ++rep)
    for (const std::string& c : plan.configs) {
      const BenchSpec spec = spec_for(plan, c);
      for (int t : plan.threads)
        for (MatmulPrecision prec : plan.precisions) {
          const std::string what =
              fmt::format("{} threads={} {}{}", c, t, precision_name(prec),
                          run.repeats > 1 ? fmt::format(" [{}/{}]", rep + 1, run.repeats) : "");
          s.dg_results.push_back(measure_depthgrad(f, run, c, spec, t, prec, what));
          if (!torch.compare) continue;
          for (bool same_core : {false, true}) {
            if (same_core && (!torch_same_core || prec != MatmulPrecision::float32)) continue;
            s.torch_results.push_back(measure_torch(f, run, torch, c, spec, t, prec, what,
                                                    same_core, s.dg_results.back()));
            if (rep == 0) s.pairs.emplace_back(s.dg_results.size() - 1, s.torch_results.size() - 1);
          }
        }
    }
  return s;
}

// With --repeat: every position's median invocation stands for it; the tables first print the
// tokens/s ratio of each invocation (without --json).
void collapse_repeats(Sweep& s, const BenchRun& run, bool compare, bool as_json) {
  if (run.repeats <= 1) return;
  const int64_t repeats = run.repeats;
  const size_t per_round_dg = s.dg_results.size() / repeats,
               per_round_torch = s.torch_results.size() / repeats;
  std::vector<BenchResult> all_dg = std::move(s.dg_results), all_torch = std::move(s.torch_results);
  s.dg_results = median_results(all_dg, per_round_dg);
  if (compare) s.torch_results = median_results(all_torch, per_round_torch);
  if (as_json) return;
  fmt::print("{} invocations of every measurement; tokens/s ratio per invocation:\n", repeats);
  for (const auto& [i, j] : s.pairs) {
    std::string line = fmt::format("  {} threads={} {} vs {}:", all_dg[i].config, all_dg[i].threads,
                                   all_dg[i].precision, bench_label(all_torch[j]));
    for (int64_t r = 0; r < repeats; ++r)
      line +=
          fmt::format(" {:.2f}", all_dg[size_t(r) * per_round_dg + i].tokens_per_second /
                                     all_torch[size_t(r) * per_round_torch + j].tokens_per_second);
    fmt::print("{}\n", line);
  }
  fmt::print("\n");
}

// --mpi: 2 ranks x 1 thread against 1 process x 2 threads, same global batch.
struct MpiRow {
  BenchResult one_process, two_ranks;
};

std::vector<MpiRow> run_mpi_comparison(const Flags& f, const Plan& plan) {
  std::vector<MpiRow> mpi_rows;
  if (!f.get_bool("mpi")) return mpi_rows;
  std::vector<std::string> launcher{f.get("mpirun"), "-np", "2", "--bind-to", "none"};
  if (geteuid() == 0) launcher.push_back("--allow-run-as-root");  // Open MPI refuses root else
  for (const std::string& c : plan.configs) {
    BenchSpec spec = spec_for(plan, c);
    for (MatmulPrecision prec : plan.precisions) {
      MpiRow row;
      std::vector<std::string> args = one_args(f, c, spec, 2, prec, 2 * plan.accum);
      for (const char* a : {"--no-profile", "--no-peak"}) args.push_back(a);
      note(fmt::format("depthgrad  {} {}: 1 process x 2 threads, --accum {} ...", c,
                       precision_name(prec), 2 * plan.accum));
      row.one_process = BenchResult::from_json(
          last_json_line(run_capture(args), "depthgrad bench --one"), "depthgrad bench --one");
      args = one_args(f, c, spec, 1, prec, plan.accum);
      for (const char* a : {"--no-profile", "--no-peak"}) args.push_back(a);
      args.insert(args.begin(), launcher.begin(), launcher.end());
      note(fmt::format("depthgrad  {} {}: 2 MPI ranks x 1 thread ...", c, precision_name(prec)));
      row.two_ranks =
          BenchResult::from_json(last_json_line(run_capture(args), "mpirun depthgrad bench --one"),
                                 "mpirun depthgrad bench --one");
      if (row.two_ranks.ranks != 2)
        throw std::runtime_error(
            fmt::format("--mpi: `{} -np 2 depthgrad bench --one` ran {} rank(s): this depthgrad "
                        "was built without MPI (configure with -DDG_MPI=ON)",
                        f.get("mpirun"), row.two_ranks.ranks));
      note(fmt::format("  {:.0f} tokens/s (1x2) vs {:.0f} tokens/s (2x1)",
                       row.one_process.tokens_per_second, row.two_ranks.tokens_per_second));
      mpi_rows.push_back(row);
    }
  }
  return mpi_rows;
}

// What the sweep found, for its printing.
struct SweepReport {
  explicit SweepReport(const Plan& p) : plan(p) {}
  const Plan& plan;
  bool compare = false;
  std::string load_start, load_end;
  std::vector<CheckRow> checks;
  Sweep sweep;
  std::vector<MpiRow> mpi_rows;
};

void print_bench_json(const SweepReport& r) {
  json::Value doc;
  doc["provenance"] = provenance_json(r.plan.threads.back());
  doc["load_average_start"] = r.load_start;
  doc["load_average_end"] = r.load_end;
  json::Array rows, trows, crows, ratios, mrows;
  for (const BenchResult& x : r.sweep.dg_results) rows.push_back(x.to_json());
  for (const BenchResult& x : r.sweep.torch_results) trows.push_back(x.to_json());
  for (const CheckRow& x : r.checks) crows.push_back(check_json(x));
  for (const BenchResult& p : r.sweep.torch_results)
    for (const BenchResult& d : r.sweep.dg_results) {
      if (d.config != p.config || d.threads != p.threads || d.precision != p.precision) continue;
      json::Value q;
      q["config"] = d.config;
      q["threads"] = d.threads;
      q["precision"] = d.precision;
      q["torch"] = bench_label(p);
      q["tokens_per_second_ratio"] = d.tokens_per_second / p.tokens_per_second;
      q["peak_rss_ratio"] = double(d.peak_rss_kib) / double(std::max<int64_t>(p.peak_rss_kib, 1));
      ratios.push_back(q);
    }
  for (const MpiRow& m : r.mpi_rows) {
    json::Value q;
    q["config"] = m.one_process.config;
    q["precision"] = m.one_process.precision;
    q["one_process_two_threads"] = m.one_process.to_json();
    q["two_ranks_one_thread"] = m.two_ranks.to_json();
    q["tokens_per_second_ratio"] = m.two_ranks.tokens_per_second / m.one_process.tokens_per_second;
    mrows.push_back(q);
  }
  doc["results"] = json::Value(std::move(rows));
  if (r.compare) {
    doc["torch_results"] = json::Value(std::move(trows));
    doc["check"] = json::Value(std::move(crows));
    doc["ratios"] = json::Value(std::move(ratios));
  }
  if (!r.mpi_rows.empty()) doc["mpi"] = json::Value(std::move(mrows));
  fmt::print("{}\n", json::dump(doc, 2));
}

void print_bench_tables(const Flags& f, const SweepReport& r) {
  const std::vector<BenchResult>& dg_results = r.sweep.dg_results;
  fmt::print("depthgrad bench, mode {}; {}; load average {} (start) / {} (end)\n{}\n",
             f.get("mode"), blas_config(), r.load_start, r.load_end, machine_text());
  std::vector<BenchResult> all = dg_results;
  all.insert(all.end(), r.sweep.torch_results.begin(), r.sweep.torch_results.end());
  fmt::print("{}\n", bench_table(all));
  if (!f.get_bool("no-peak"))
    fmt::print("GEMM kernels timed for the peaks:\n{}\n", peak_table(dg_results));
  if (!f.get_bool("no-profile"))
    fmt::print("time by op family (depthgrad):\n{}\n", breakdown_table(dg_results));
  if (r.compare)
    fmt::print("depthgrad vs torch:\n{}", compare_table(dg_results, r.sweep.torch_results));
  if (r.compare && !torch_needs_same_core({r.compare, "", ""}))
    fmt::print("(no torch+core rows: OpenBLAS runs {} by its own choice, in torch as here)\n",
               select_gemm_kernels().blas_core);
  if (r.mpi_rows.empty()) return;
  std::vector<BenchResult> mpi_all;
  for (const MpiRow& m : r.mpi_rows) mpi_all.insert(mpi_all.end(), {m.one_process, m.two_ranks});
  fmt::print(
      "\nMPI: 2 ranks x 1 thread (--accum {}) against 1 process x 2 threads (--accum {}), same "
      "global batch:\n{}",
      r.plan.accum, 2 * r.plan.accum, bench_table(mpi_all));
  for (const MpiRow& m : r.mpi_rows)
    fmt::print("{} {}: tokens/s 2x1 / 1x2 = {:.2f}\n", m.one_process.config,
               m.one_process.precision,
               m.two_ranks.tokens_per_second / m.one_process.tokens_per_second);
}

// The sweep: the equivalence check, every measurement in its own process (torch beside it with
// --compare-torch), the MPI comparison, then one JSON document or the tables.
int sweep_and_report(const Flags& f, const BenchRun& run) {
  const TorchReference torch = torch_reference_for(f, run.plan);
  SweepReport report(run.plan);
  report.compare = torch.compare;
  report.load_start = load_average();
  report.checks = run_equivalence_checks(f, run.plan, torch);
  report.sweep = run_measurements(f, run, torch);
  collapse_repeats(report.sweep, run, torch.compare, f.get_bool("json"));
  report.mpi_rows = run_mpi_comparison(f, run.plan);
  report.load_end = load_average();
  if (f.get_bool("json"))
    print_bench_json(report);
  else
    print_bench_tables(f, report);
  return 0;
}

int bench_on_rank(int argc, char** argv, int start, World& world, bool& agreed) {
  const std::string preset_names = preset_name_list();
  Flags f("bench", bench_description());
  declare_bench_flags(f, preset_names);
  if (!f.parse(argc, argv, start)) {
    if (world.rank() == 0) fmt::print("{}", f.help());
    return 0;
  }
  check_same_flags(world, f);  // every rank must be asked the same before anything is refused
  agreed = true;
  if (world.size() > 1 && !f.given("one"))
    throw UsageError(
        "under mpirun, bench measures one config over the ranks: give --one CONFIG (and one "
        "--threads per rank)");
  const BenchRun run = parse_bench_run(f, preset_names);
  if (f.given("one")) return measure_in_this_process(f, run, world);
  if (f.get_bool("generate")) return time_generation(f, run.plan);
  if (f.get_bool("overwrite") && !f.given("write-check"))
    throw UsageError("--overwrite: only --write-check writes into a folder");
  if (f.given("write-check")) return write_check_files(f, run.plan);
  return sweep_and_report(f, run);
}

}  // namespace

int cmd_bench(int argc, char** argv, int start) {
  World world;  // MPI when started by mpirun/srun (then: --one CONFIG over the ranks)
  return run_on_every_rank(world, "bench", [&](bool& agreed) {
    return bench_on_rank(argc, argv, start, world, agreed);
  });
}

}  // namespace dg::cli
