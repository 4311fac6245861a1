// `depthgrad evolve`: flags -> EvolveOptions -> corpus and trainer -> the search -> summary and
// paths. The search itself (proposals, scoring, resume, reports) lives in tools/attnres/evolve.h;
// this file only parses flags, loads the data once, wires progress output and prints the result.
#include <fmt/core.h>

#include <chrono>

#include "tensor/threads.h"
#include "tools/attnres/evolve.h"
#include "tools/attnres/reproduce.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/preset_flag.h"
#include "tools/cli/progress.h"
#include "tools/cli/run_config_flags.h"
#include "tools/cli/shared_flags.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/run_record.h"
#include "train/lm/data/corpus.h"
#include "train/lm/data/data_files.h"
#include "train/lm/data/text_corpus.h"
#include "train/stop.h"

namespace dg::cli {

namespace {
// Flags that define the search; --resume takes them from the recorded run instead.
const char* kSearchFlags[] = {
    "model",       "dataset",  "direction",    "generations",  "population", "steps",
    "trial-seeds", "seed",     "confidence-z", "eval-windows", "mode",       "dim",
    "layers",      "heads",    "kv-heads",     "mutation",     "seq-len",    "batch",
    "lr",          "schedule", "preset"};

// The baseline genome's run with the evolve defaults: Genome()'s values and EvolveOptions'
// evaluation windows, shown as the flags' defaults.
RunConfig evolve_baseline_defaults() {
  RunConfig baseline = Genome().run;
  baseline.data.eval_windows = EvolveOptions().eval_windows;
  return baseline;
}

std::string evolve_description() {
  return "Evolutionary search over micro-LM genomes (residual mode, width, depth, heads, K/V "
         "heads, lr, schedule,\n"
         "steps, batch), steered by --direction. Every trial trains on --trial-seeds seeds and is "
         "scored by mean\n"
         "validation NLL + z·stderr; the test split is evaluated once at the end (baseline and "
         "champion).\nA champion that differs from its parent in more than one gene has each "
         "changed gene trained alone\n(the ablation: result.json says which gene carries the "
         "gain, or that it is confounded).\n\n" +
         preset_help_text() +
         "\nevolve: a preset gives the baseline genome's dim, layers, heads, kv-heads, seq-len "
         "and batch (and the vocabulary); genomes keep ffn expansion 3.";
}

void declare_evolve_flags(Flags& f) {
  const EvolveOptions defaults;
  f.add("model", "micro-llm", "model family (only micro-llm)")
      .add("dataset", "wikitext-2",
           "wikitext-2, or your own text: a file (its last 10% held out for validation) or a "
           "folder of train.txt, validation.txt (or valid.txt, val.txt) and optionally test.txt")
      .add("direction", defaults.direction,
           "research direction (English or Chinese keywords steer the search space)")
      .add("generations", "2", "generations after the baseline")
      .add("population", "4", "children proposed per generation")
      .add("trial-seeds", "2", "seeds per trial (seeds --seed, --seed+1, …)")
      .add("seed", "42", "first training seed; also seeds the proposal RNG")
      .add("confidence-z", "1.0", "score = mean validation NLL + z·stderr")
      .add("mutation", "single",
           "genes a mutation changes: single (one, so every gain is attributable) | multi (one, "
           "or two with probability 0.3)")
      .add("mode", "",
           "baseline residual mode; empty = the direction's centre (block_attnres for AttnRes "
           "directions)");
  // The baseline genome's settings (and the evaluation windows) as the run config's flags, with
  // Genome()'s values (and EvolveOptions') as their defaults.
  const RunConfig baseline = evolve_baseline_defaults();
  add_run_config_flags(
      f, {{"", baseline}},
      {"dim", "layers", "heads", "kv-heads", "seq-len", "steps", "batch", "lr", "schedule",
       "eval-windows", "precision"},
      {{"kv-heads", fmt::format("(evolve's baseline: {})", baseline.model.kv_heads)},
       {"seq-len", "(fixed for every genome)"},
       {"steps",
        "of the baseline genome. With identical initialisation block_attnres and rd_attnres\n"
        "train almost alike at first (their routes start equal; at d64 L4 their losses differ by "
        "< 1e-4 until\n"
        "step 60-180): after 200 steps their NLLs differ by ~2e-5 with no consistent sign, so "
        "shorter budgets\n"
        "cannot tell them apart; after 600 steps rd is lower on every seed"}});
  add_preset_flag(f)
      .add("output-dir", "runs/evolution",
           "where run directories (micro-llm-<timestamp>) are created")
      .add("resume", "",
           "continue the run in this directory after its last finished trial (reads its "
           "result.json); the search settings are the recorded ones, but --generations may "
           "raise them to add generations to a finished search");
  add_threads_flag(add_data_location_flags(f), /*sized_to_run=*/true)
      .add_switch("quiet", "no progress output");
}

// --resume DIR: the recorded search settings (only --generations may be given, to add
// generations); `resume` gets the recorded result.json.
EvolveOptions resumed_options(const Flags& f, json::Value& resume) {
  std::string given;
  for (const char* name : kSearchFlags)
    if (f.given(name) && std::string(name) != "generations")
      given += fmt::format("{}--{}", given.empty() ? "" : ", ", name);
  if (!given.empty())
    throw UsageError(
        fmt::format("--resume takes the search settings from the recorded run; drop {}", given));
  std::string dir = f.get("resume");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string path = dir + "/result.json";
  if (!file_exists(path))
    throw std::runtime_error(fmt::format("--resume: {} does not exist", path));
  resume = json::parse(read_file(path), path);
  EvolveOptions o = evolve_options_from_config(resume.at("config"));
  o.run_dir = dir;
  // More generations may be added to a run, finished or not (never fewer: the search refuses).
  if (f.given("generations")) o.generations = f.get_int("generations");
  return o;
}

// The baseline genome from the flags: the preset's sizes under the flags given, the residual
// mode given or the direction's centre. Sets o.baseline, o.vocab (a preset's) and o.eval_windows.
void baseline_from_flags(const Flags& f, EvolveOptions& o) {
  Genome& b = o.baseline;  // a RunConfig with genes (evolve/genome.h)
  RunConfig sizes = evolve_baseline_defaults();
  const bool preset = apply_preset_flag(f, sizes);  // the preset's sizes, under the flags given
  if (preset) {
    if (sizes.model.expansion != MicroLMConfig{}.expansion)
      throw UsageError(fmt::format(
          "--preset {}: its ffn expansion is {}, and evolve's genomes have expansion {}",
          sizes.preset, sizes.model.expansion, MicroLMConfig{}.expansion));
    o.vocab = sizes.model.vocab;
  }
  apply_run_config_flags(f, sizes);  // ranges checked: --dim 0, --lr -1 are refused
  const MicroLMConfig& m = sizes.model;
  const LMTrainingConfig& t = sizes.training;
  const int64_t kv_heads =
      preset && f.given("heads") && !f.given("kv-heads") ? m.heads : m.kv_heads;
  o.eval_windows = sizes.data.eval_windows;
  for (auto [gene, value] : {std::pair{Gene::steps, t.steps},
                             {Gene::dim, m.dim},
                             {Gene::layers, m.layers},
                             {Gene::heads, m.heads},
                             {Gene::kv_heads, kv_heads},
                             {Gene::batch, t.batch}})
    set_gene(b, gene, std::to_string(value));
  set_gene(b, Gene::lr, fmt::format("{}", t.adamw.lr));
  set_gene(b, Gene::schedule, schedule_kind_name(t.schedule.kind));
  b.run.model.seq_len = m.seq_len;         // fixed for every genome of the search
  b.run.training.precision = t.precision;  // and so is the matmul precision
  b.run.model.mode =
      f.given("mode") ? parse_residual_mode(f.get("mode")) : plan_direction(o.direction, b).centre;
  try {
    genome_model_config(b, o.vocab);
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("the baseline genome is not buildable: {}", e.what()));
  }
}

// A new search's settings from the flags.
EvolveOptions new_search_options(const Flags& f) {
  EvolveOptions o;
  o.model = f.get("model");
  if (o.model != "micro-llm")
    throw UsageError(fmt::format("--model: only micro-llm is supported, got '{}'", o.model));
  o.dataset = f.get("dataset");
  if (o.dataset == "tiny-shakespeare")
    throw UsageError("--dataset: evolve takes wikitext-2 or your own text, not tiny-shakespeare");
  o.direction = f.get("direction");
  o.generations = f.get_int("generations");
  o.population = f.get_int("population");
  o.trial_seeds = f.get_int("trial-seeds");
  o.seed = parse_seed_list(f.get("seed"), "--seed").at(0);
  if (f.get("seed").find_first_of(",-") != std::string::npos)
    throw UsageError("--seed: one seed (the trial seeds follow it)");
  o.confidence_z = f.get_double("confidence-z");
  o.mutation = f.get("mutation");
  if (o.mutation != "single" && o.mutation != "multi")
    throw UsageError(fmt::format("--mutation: expected single or multi, got '{}'", o.mutation));
  baseline_from_flags(f, o);
  return o;
}

// What result.json records of the data: its name, sizes, tokenizer and the files' hashes.
json::Value dataset_info(const Corpus& corpus, bool own_text, const TextSplit& split,
                         const DataLocation& data) {
  json::Value ds;
  ds["name"] = own_text ? split.description : "WikiText-2";
  if (!own_text) ds["dataset_dir"] = data.data_dir;
  ds["train_tokens"] = static_cast<int64_t>(corpus.train.size());
  ds["validation_tokens"] = static_cast<int64_t>(corpus.validation.size());
  ds["test_tokens"] = static_cast<int64_t>(corpus.test.size());
  ds["vocab_size"] = corpus.tokenizer.vocab_size();
  ds["tokenizer"] = own_text ? "byte-level BPE (all 256 bytes) trained on the train part"
                             : "byte-level BPE trained on WikiText-2 train + Tiny Shakespeare";
  ds["tokenizer_sha256"] = corpus.tokenizer_sha256;
  json::Value sha;
  for (const auto& [path, hash] : corpus.dataset_sha256) sha[path] = hash;
  ds["sha256"] = sha;
  return ds;
}

// The data, once. Own text: a tokenizer over all 256 bytes, 10% held out when there is no
// validation file (train/lm/data/text_corpus.h); the test split is the validation split when
// there is no test.txt. Records it in o.dataset_info.
Corpus load_evolve_corpus(EvolveOptions& o, Progress& progress, const DataLocation& data) {
  const bool own_text = !is_builtin_dataset(o.dataset);
  CorpusOptions co;
  co.full_byte_alphabet = own_text;
  co.data_dir = data.data_dir;
  co.cache_dir = data.cache_dir;
  co.vocab_size = static_cast<int>(o.vocab);
  co.train_limit = 0;  // the whole train split; batches are random windows of it
  co.eval_limit = 0;   // the evaluation takes its windows from the split's start
  TextSplit split;
  Corpus corpus =
      own_text ? load_text_corpus(o.dataset, 0.1, co, &split) : load_wikitext_corpus(co);
  progress.message(fmt::format(
      "tokenizer: BPE-{} ({}); {} train, {} validation, {} test ids", corpus.tokenizer.vocab_size(),
      corpus.tokenizer_from_cache ? "cache"
                                  : fmt::format("trained in {:.1f} s", corpus.tokenizer_seconds),
      corpus.train.size(), corpus.validation.size(), corpus.test.size()));
  o.dataset_info = dataset_info(corpus, own_text, split, data);
  return corpus;
}

// The search with its progress line and a stop request's resume command; prints the summary.
int run_search(int argc, char** argv, EvolveOptions& o, const Corpus& corpus,
               const json::Value* resume, Progress& progress, const ThreadChoice& thread_choice,
               std::chrono::steady_clock::time_point wall_start) {
  int64_t done = 0, planned = 1;
  o.on_message = [&](const std::string& line) { progress.message(line); };
  o.on_trial = [&](const std::string&, int64_t d, int64_t p) {
    done = d;
    planned = p;
  };
  auto on_step = [&](const TrialRun& run, const StepLog& log) {
    const double within = (static_cast<double>(run.seed_index) +
                           static_cast<double>(log.step + 1) / static_cast<double>(log.steps)) /
                          static_cast<double>(run.seed_count);
    progress.step(fmt::format("[{}{} seed {} ({}/{})]", run.trial_id,
                              run.split == EvalSplit::test ? " test" : "", run.seed,
                              run.seed_index + 1, run.seed_count),
                  log.step, log.steps, log.loss, log.tokens_per_second,
                  (static_cast<double>(done) + within) / static_cast<double>(planned));
    if (log.step + 1 < log.steps)
      stop_if_requested(
          fmt::format("in trial {} after step {} of {}", run.trial_id, log.step + 1, log.steps));
  };
  TrialTrainer trainer =
      make_micro_lm_trainer(corpus.train, corpus.validation, corpus.test,
                            corpus.tokenizer.vocab_size(), o.eval_windows, on_step);
  progress.message(
      fmt::format("depthgrad evolve{}: {} generation(s) × {} children, {} seed(s) per trial, "
                  "baseline {}, {}; run {}",
                  resume ? " (resume)" : "", o.generations, o.population, o.trial_seeds,
                  genome_summary(o.baseline), thread_choice.describe(), o.run_dir));
  EvolveOutput out;
  install_stop_handlers();
  try {
    out = run_evolution(o, trainer, resume);
  } catch (const Interrupted& e) {
    progress.finish();
    std::vector<std::string> drop(std::begin(kSearchFlags), std::end(kSearchFlags));
    drop.insert(drop.end(), {"resume", "output-dir"});
    if (file_exists(o.run_dir + "/result.json"))
      fmt::print(stderr,
                 "depthgrad evolve: {}; the finished trials are in {} (the trial in training "
                 "starts again)\nresume with:\n  {}\n",
                 e.what(), o.run_dir, resume_command(argc, argv, drop, {{"resume", o.run_dir}}));
    else
      fmt::print(stderr, "depthgrad evolve: {}; no trial had finished, nothing to resume\n",
                 e.what());
    return e.exit_code();
  } catch (...) {
    progress.finish();
    if (file_exists(o.run_dir + "/result.json"))
      fmt::print(stderr,
                 "depthgrad evolve: the finished trials are in {}; continue with --resume {}\n",
                 o.run_dir, o.run_dir);
    throw;
  }
  progress.finish();
  fmt::print("{}", out.summary);
  fmt::print("wall time: {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
  return 0;
}

}  // namespace

int cmd_evolve(int argc, char** argv, int start) {
  Flags f("evolve", evolve_description());
  declare_evolve_flags(f);
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  const auto wall_start = std::chrono::steady_clock::now();
  json::Value resume;
  const bool resuming = f.given("resume");
  EvolveOptions o = resuming ? resumed_options(f, resume) : new_search_options(f);
  // The thread count: --threads, the environment, else sized to the baseline's run (genomes
  // near it are of its size; a thread count never changes a trial's bits).
  RunConfig sized = o.baseline.run;
  sized.model = genome_model_config(o.baseline, o.vocab);
  const ThreadChoice thread_choice = apply_threads_for_run(f, sized);
  o.threads = thread_choice.threads;
  const DataLocation data = resolve_data_location(f, is_builtin_dataset(o.dataset));
  Progress progress(f.get_bool("quiet"));
  const Corpus corpus = load_evolve_corpus(o, progress, data);
  if (!resuming)  // created exclusively: two runs started at once never share a folder
    o.run_dir =
        make_unique_dir(fmt::format("{}/{}-{}", f.get("output-dir"), o.model, timestamp_now()));
  make_dirs(o.run_dir);
  return run_search(argc, argv, o, corpus, resuming ? &resume : nullptr, progress, thread_choice,
                    wall_start);
}

}  // namespace dg::cli
