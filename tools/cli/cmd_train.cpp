// `depthgrad train`, `depthgrad eval` and `depthgrad tokenize`: the everyday commands.
//  train     a micro-LM from flags or a JSON config (--config), with periodic training
//            checkpoints, --resume, a JSON-lines step log and final weights (safetensors);
//            --accum K micro-batches per step, and data parallel over MPI ranks under mpirun/srun
//            (rank 0 prints and writes; --zero 1 shards AdamW's moments; tools/cli/ranks.h).
//            It refuses an --output-dir holding a run it neither continues (--resume) nor was
//            told to replace (--overwrite).
//  eval      a checkpoint (weights or training checkpoint) on a split: reference windows or all.
//  tokenize  train a byte-level BPE (on the pinned corpus or given files), or encode/decode text;
//            an existing --output is written over only with --overwrite.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "tensor/gemm_kernels.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_guard.h"
#include "tools/cli/preset_flag.h"
#include "tools/cli/progress.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run_config_flags.h"
#include "tools/cli/shared_flags.h"
#include "tools/cli/train_run.h"
#include "tools/cli/train_samples.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/run_record.h"
#include "train/io/safetensors.h"
#include "train/io/sha256.h"
#include "train/lm/batches.h"
#include "train/lm/data/corpus.h"
#include "train/lm/data/data_files.h"
#include "train/lm/data/text_corpus.h"
#include "train/lm/memory_budget.h"
#include "train/lm/micro_lm_training.h"
#include "train/lm/run_config.h"
#include "train/lm/trained_model.h"
#include "train/stop.h"
#include "train/trainer.h"

namespace dg::cli {

namespace {
// `tokenizer_json`: a given tokenizer (an imported model's) instead of one trained on the data.
Splits load_splits(const DataConfig& config, const DataLocation& where, int vocab,
                   const std::string& tokenizer_json = "") {
  CorpusOptions co;
  co.tokenizer_json = tokenizer_json;
  co.data_dir = where.data_dir;
  co.cache_dir = where.cache_dir;
  co.vocab_size = vocab;
  co.full_byte_alphabet = config.full_byte_alphabet;
  co.train_limit = co.eval_limit = co.narrative_limit = 0;
  Splits s;
  if (!is_builtin_dataset(config.dataset)) {
    TextSplit split;
    s.corpus = load_text_corpus(config.dataset, config.validation_fraction, co, &split);
    s.train = s.corpus.train;
    s.validation = s.corpus.validation;
    s.test = s.corpus.test;
    s.description = split.description;
  } else {
    s.corpus = load_wikitext_corpus(co);
    s.description = config.dataset;
    if (config.dataset == "wikitext-2") {
      s.train = s.corpus.train;
      s.validation = s.corpus.validation;
      s.test = s.corpus.test;
    } else {
      const auto& n = s.corpus.narrative;
      size_t cut = n.size() * 9 / 10;
      s.train.assign(n.begin(), n.begin() + cut);
      s.validation.assign(n.begin() + cut, n.end());
      s.test = s.validation;
    }
  }
  auto cut = [](std::vector<int32_t>& ids, int64_t limit) {
    if (limit > 0 && static_cast<int64_t>(ids.size()) > limit)
      ids.resize(static_cast<size_t>(limit));
  };
  cut(s.train, config.train_limit);
  cut(s.validation, config.eval_limit);
  cut(s.test, config.eval_limit);
  return s;
}

// A split too short for one window of seq_len + 1 tokens cannot be trained or evaluated on.
void check_split_length(const std::vector<int32_t>& ids, const char* split, int64_t seq_len,
                        const std::string& source) {
  if (static_cast<int64_t>(ids.size()) < seq_len + 1)
    throw std::runtime_error(fmt::format(
        "{}: the {} split has {} tokens, fewer than seq_len + 1 = {}; give more text{}", source,
        split, ids.size(), seq_len + 1,
        std::string(split) == "validation" ? " or a larger --validation-fraction" : ""));
}

// The tokenizer.json of a model folder whose tokenizer is given rather than trained on the data
// (metadata "depthgrad.tokenizer": "given": written by depthgrad import and by train
// --init-from), or "" for a model whose run trained its tokenizer.
std::string given_tokenizer(const std::map<std::string, std::string>& metadata,
                            const std::string& weights_path) {
  auto it = metadata.find("depthgrad.tokenizer");
  if (it == metadata.end() || it->second != "given") return "";
  const std::string path =
      (std::filesystem::path(weights_path).parent_path() / "tokenizer.json").string();
  if (!file_exists(path))
    throw std::runtime_error(
        fmt::format("{}: the model's tokenizer is given, not trained, and {} does not exist",
                    weights_path, path));
  return read_file(path);
}

// What `train` runs without --config: the reference's model (RunConfig{}) trained for 1000 steps
// with a cosine schedule, weight decay on matrices and identical initialisation (every mode
// starts as the same function). The flags' defaults shown by --help are these values.
RunConfig train_defaults() {
  RunConfig c;
  c.training.steps = 1000;
  c.training.schedule.kind = Schedule::Kind::warmup_cosine;
  c.training.adamw.decay = DecayPolicy::matrices_only;
  c.training.init = InitScheme::identical;
  return c;
}

// What train writes into --output-dir: a folder holding any of these holds a run, which a new
// run does not replace without --overwrite (tools/cli/output_guard.h).
const std::vector<std::string> kTrainRunFiles = {"config.json",       "tokenizer.json",
                                                 "steps.jsonl",       "checkpoint.safetensors",
                                                 "model.safetensors", "summary.json"};

// Refused (the message; empty: go on) when `out` holds a run this invocation would replace: one
// it neither continues (--resume of the checkpoint in `out`) nor is told to replace (--overwrite).
std::string train_output_refusal(const std::string& out, const std::string& resume,
                                 bool overwrite) {
  namespace fs = std::filesystem;
  if (overwrite) return "";
  std::error_code ec;
  if (!resume.empty() && fs::equivalent(fs::absolute(resume).parent_path(), out, ec) && !ec)
    return "";  // continuing the run that is there
  const std::string ckpt = (fs::path(out) / "checkpoint.safetensors").string();
  return replace_refusal(
      out, kTrainRunFiles, "a run",
      fmt::format("{}replace it with --overwrite, or give a fresh --output-dir",
                  file_exists(ckpt) ? fmt::format("continue it with --resume {}, ", ckpt) : ""));
}

// --dataset, --validation-fraction, the data location flags, --vocab, --threads (eval)
void add_data_flags(Flags& f) {
  add_dataset_flags(f);
  add_data_location_flags(f).add("vocab", "512", "BPE vocabulary size");
  add_threads_flag(f);
}

// ---- train_on_rank's steps, in the order it takes them ----

void declare_train_flags(Flags& f) {
  f.add("config", "",
        "JSON run config: {model, training, data} as written to <output-dir>/config.json");
  add_preset_flag(f);
  add_run_config_flags(f, {{"", train_defaults()}}, {},
                       {{"warmup", "(default: 5% of the steps with cosine)"}});
  f.add("output-dir", "runs/train/latest", "output directory (config, log, checkpoints, weights)")
      .alias("output")
      .add("checkpoint-every", "200", "steps between training checkpoints (0 = only at the end)")
      .add("eval-every", "0", "steps between validation evaluations (0 = only at the end)")
      .add("resume", "", "training checkpoint to resume from")
      .add("init-from", "",
           "a depthgrad model folder (depthgrad import's --to, or a train output): start from its "
           "model.safetensors with its tokenizer.json; its model settings replace the model flags")
      .add_switch("skip-nonfinite",
                  "skip a step whose loss or gradient is not finite (counted in the log) instead "
                  "of stopping the run")
      .add_switch("quiet", "no progress output");
  add_overwrite_flag(f, "the run in --output-dir: its files are removed before the new run writes");
  add_layout_flags(f);
  add_data_location_flags(f);
  add_threads_flag(f, /*sized_to_run=*/true);
  add_train_sample_flags(f);
}

// --init-from DIR: the model (settings, weights, tokenizer) is the folder's.
struct InitialModel {
  std::string dir;  // empty: no --init-from
  std::optional<TrainedModel> model;
  std::string tokenizer_json;
};

// Loads the --init-from folder; no model flag may say otherwise.
InitialModel load_initial_model(const Flags& f) {
  InitialModel init;
  init.dir = f.get("init-from");
  if (init.dir.empty()) return init;
  for (const Setting<RunConfig>& row : run_config_settings())
    if (row.section == "model" && f.given(row.flag_name()))
      throw UsageError(
          fmt::format("--{} and --init-from {}: the model's settings are the "
                      "folder's",
                      row.flag_name(), init.dir));
  if (f.given("preset")) throw UsageError("--preset and --init-from: give one");
  init.model = load_trained_model(init.dir + "/model.safetensors");
  const std::string tokenizer_path = init.dir + "/tokenizer.json";
  if (!file_exists(tokenizer_path))
    throw std::runtime_error(fmt::format("--init-from: {} does not exist", tokenizer_path));
  init.tokenizer_json = read_file(tokenizer_path);
  check_tokenizer_sha256(*init.model, init.dir + "/model.safetensors",
                         sha256_hex(init.tokenizer_json), tokenizer_path);
  init.model->model.reset();  // settings and metadata kept; the trainer's model reads the weights
  return init;
}

// The run: the --config file (else train_defaults()), then --preset, then every flag given on
// top; with --init-from, the folder's model. Loads that folder into `init`.
RunConfig train_run_from_flags(const Flags& f, InitialModel& init) {
  RunConfig run = train_defaults();
  if (f.given("config") && f.given("preset"))
    throw UsageError(fmt::format(
        "--preset {} and --config {}: both set the model sizes; give one (flags override either)",
        f.get("preset"), f.get("config")));
  if (f.given("config"))
    run = run_config_from_json(json::parse(read_file(f.get("config")), f.get("config")),
                               f.get("config"));
  apply_preset_flag(f, run);
  apply_run_config_flags(f, run);  // the flags given, over the file, the preset or the defaults
  init = load_initial_model(f);
  MicroLMConfig& model = run.model;
  LMTrainingConfig& training = run.training;
  // Settings that follow others unless given: K/V heads follow the heads (from the file, the
  // file's), and the warm-up is 5% of the steps with cosine, none with constant.
  if (!f.given("kv-heads") && !f.given("config")) model.kv_heads = model.heads;
  if (init.model) model = init.model->config.model;
  if (f.given("schedule") || !f.given("config")) {
    Schedule& schedule = training.schedule;
    if (schedule.kind == Schedule::Kind::constant)
      schedule.warmup_steps = 0;
    else if (!f.given("warmup"))
      schedule.warmup_steps = default_warmup_steps(schedule.kind, training.steps);
  }
  training.schedule.lr = training.adamw.lr;
  training.schedule.total_steps = training.steps;
  return run;
}

}  // namespace

// A run already in the output folder is refused before any work, as rank 0 sees the folder.
void refuse_replacing_a_run(const Flags& f, World& world) {
  const bool resuming = !f.get("resume").empty(), overwrite = f.get_bool("overwrite");
  if (resuming && overwrite)
    throw UsageError(
        "--resume and --overwrite: --resume continues a run, --overwrite removes the one in "
        "--output-dir; give one");
  std::string refusal = world.rank() == 0
                            ? train_output_refusal(f.get("output-dir"), f.get("resume"), overwrite)
                            : "";
  if (world.size() > 1) refusal = world.collectives().all_gather(refusal).at(0);
  if (!refusal.empty()) throw UsageError(refusal);
}

// The run's token ids, rank 0 first (it fills the tokenizer cache); sets the model's vocabulary
// to the tokenizer's and refuses splits too short for the run.
Splits load_train_data(const Flags& f, World& world, RunConfig& run,
                       const std::string& init_tokenizer_json) {
  const bool writes = world.rank() == 0;
  MicroLMConfig& model = run.model;
  const bool own_text = !is_builtin_dataset(run.data.dataset);
  const DataLocation where = resolve_data_location(f, !own_text);
  if (!writes) world.collectives().barrier();  // rank 0 fills the tokenizer cache first
  Splits data = load_splits(run.data, where, static_cast<int>(model.vocab), init_tokenizer_json);
  if (writes) world.collectives().barrier();
  check_split_length(data.train, "train", model.seq_len, data.description);
  check_split_length(data.validation, "validation", model.seq_len, data.description);
  model.vocab = data.corpus.tokenizer.vocab_size();  // the model takes the tokenizer's size
  const LMTrainingConfig& cfg = run.training;
  const int64_t global_batch = world.size() * cfg.accum * cfg.batch;
  if (cfg.sequential &&
      static_cast<int64_t>(data.train.size()) < global_batch * run.model.seq_len + 1)
    throw UsageError(
        fmt::format("--sequential: {} train ids cannot fill one global batch of {} "
                    "windows of {}",
                    data.train.size(), global_batch, run.model.seq_len));
  return data;
}

// Rank 0's files at the start: config.json and tokenizer.json; with --overwrite the old run's
// files go first, and on --resume the step log keeps the lines before the checkpoint's step.
void write_run_start(const std::string& out, bool overwrite, bool resuming, const RunConfig& run,
                     const Splits& data, int64_t resumed_step) {
  make_dirs(out);
  if (overwrite) remove_files(out, kTrainRunFiles);  // no file of the old run survives
  write_file_atomic(out + "/config.json", json::dump(to_json(run), 2) + "\n");
  write_file_atomic(out + "/tokenizer.json", data.corpus.tokenizer_json);
  // The steps before the checkpoint's are kept; later ones (logged after that checkpoint by
  // the run that stopped) are dropped, so appending from there gives one line per step.
  if (resuming)
    keep_log_lines(out + "/steps.jsonl", [step = resumed_step](const json::Value& line) {
      const json::Value* s = line.is_object() ? line.find("step") : nullptr;
      return s && s->is_number() && s->as_double() < static_cast<double>(step);
    });
}

EvalWindows validation_windows(const RunConfig& run, const Splits& data) {
  EvalWindows w;
  const int64_t windows = run.data.eval_windows;
  w.starts = windows > 0 ? reference_eval_starts(static_cast<int64_t>(data.validation.size()),
                                                 run.model.seq_len, windows)
                         : full_eval_starts(static_cast<int64_t>(data.validation.size()),
                                            run.model.seq_len);
  w.what = windows > 0 ? fmt::format("{} validation windows of {} tokens", w.starts.size(),
                                     run.model.seq_len)
                       : fmt::format("the full validation split: {} windows of {} tokens",
                                     w.starts.size(), run.model.seq_len);
  return w;
}

// After each step: the step log line, the validation loss and a sample when due, a checkpoint
// when due, and a requested stop.
void after_train_step(const TrainLoop& loop, MicroLMTrainer& trainer, const StepLog& log) {
  const LMTrainingConfig& cfg = loop.run.training;
  const int64_t checkpoint_every = loop.f.get_int("checkpoint-every"),
                eval_every = loop.f.get_int("eval-every");
  Progress& progress = loop.progress;
  progress.step("[train]", log.step, log.steps, log.loss, log.tokens_per_second,
                static_cast<double>(log.step + 1) / static_cast<double>(cfg.steps));
  json::Value j;
  j["step"] = log.step;
  if (log.skipped) {  // its loss is not a JSON number: the log says what was skipped
    j["skipped"] = true;
    j["loss"] = fmt::format("{}", log.loss);
    j["skipped_steps"] = log.skipped_steps;
    progress.message(
        fmt::format("step {}: the loss ({}) or a gradient is not finite: step "
                    "skipped ({} so far)",
                    log.step + 1, log.loss, log.skipped_steps));
  } else {
    j["loss"] = log.loss;
    j["grad_norm"] = log.grad_norm;
    j["clipped"] = log.clipped;
    j["lr"] = log.lr;
    j["tokens_per_second"] = log.tokens_per_second;
    j["seconds"] = log.seconds;
    if (loop.world.size() > 1) {
      j["communication_seconds"] = log.communication_seconds;
      j["reduction_wait_seconds"] = log.reduction_wait_seconds;
    }
    if (log.skipped_steps > 0) j["skipped_steps"] = log.skipped_steps;
    if (loop.writes && eval_every > 0 && (log.step + 1) % eval_every == 0) {
      double v = evaluate_windows(trainer.model(), loop.data.validation, loop.eval.starts,
                                  loop.run.model.seq_len);
      j["validation_loss"] = v;
      progress.message(fmt::format("step {}: validation loss {:.4f} (perplexity {:.2f}) on {}",
                                   log.step + 1, v, std::exp(std::min(v, 20.0)), loop.eval.what));
    }
    if (loop.writes) loop.samples.after_step(log.step + 1, trainer.model(), progress);
  }
  progress.log_json(json::dump(j));
  if (checkpoint_every > 0 && (log.step + 1) % checkpoint_every == 0 && log.step + 1 < cfg.steps)
    trainer.save_checkpoint(loop.ckpt);
  if (loop.world.size() == 1 && log.step + 1 < cfg.steps)
    stop_if_requested(fmt::format("after step {} of {}", log.step + 1, cfg.steps));
}

std::string checkpoint_path_in(const std::string& out) { return out + "/checkpoint.safetensors"; }

namespace {

// Rank 0's files at the end: the weights (with the tokenizer they were trained with) and
// summary.json; prints the validation loss and where the files are.
void write_run_end(const std::string& out, const RunConfig& run, const Splits& data,
                   const EvalWindows& eval, const InitialModel& init, MicroLMTrainer& trainer,
                   int threads) {
  std::map<std::string, std::string> meta{
      {"depthgrad.config", json::dump(to_json(run))},
      {"depthgrad.tokenizer_sha256", data.corpus.tokenizer_sha256}};
  if (init.model) {  // the folder's tokenizer and its token ids carry over
    meta["depthgrad.tokenizer"] = "given";
    for (const char* key : {"depthgrad.bos_token_id", "depthgrad.eos_token_id"})
      if (init.model->metadata.count(key)) meta[key] = init.model->metadata.at(key);
  }
  save_weights(out + "/model.safetensors", trainer.model(), meta);
  double v = evaluate_windows(trainer.model(), data.validation, eval.starts, run.model.seq_len);
  if (!std::isfinite(v))  // possible after skipped steps: the weights are finite but overflow
    throw std::runtime_error(fmt::format(
        "the validation loss is {} after {} steps ({} skipped): the trained model's forward "
        "overflows (its checkpoint and weights are written to {})",
        v, trainer.step(), trainer.skipped_steps(), out));
  json::Value summary;
  summary["config"] = to_json(run);
  summary["dataset"] = data.description;
  json::Value sha;
  for (const auto& [name, hash] : data.corpus.dataset_sha256) sha[name] = hash;
  summary["dataset_sha256"] = sha;
  summary["tokenizer_sha256"] = data.corpus.tokenizer_sha256;
  summary["steps"] = trainer.step();
  summary["final_train_loss"] = trainer.losses().empty() ? 0.0 : trainer.losses().back();
  summary["validation_loss"] = v;
  summary["validation_perplexity"] = std::exp(std::min(v, 20.0));
  summary["validation_windows"] = run.data.eval_windows;
  summary["validation_tokens"] = static_cast<int64_t>(eval.starts.size()) * run.model.seq_len;
  summary["clipped_steps"] = trainer.clipped_steps();
  summary["skipped_steps"] = trainer.skipped_steps();
  summary["wall_seconds"] = trainer.wall_seconds();  // every invocation of the run, resumed too
  double full = 0;
  int64_t full_tokens = 0;
  if (run.data.eval_full) {
    const std::vector<int64_t> all =
        full_eval_starts(static_cast<int64_t>(data.validation.size()), run.model.seq_len);
    full = evaluate_windows(trainer.model(), data.validation, all, run.model.seq_len);
    full_tokens = static_cast<int64_t>(all.size()) * run.model.seq_len;
    summary["full_validation_loss"] = full;
    summary["full_validation_tokens"] = full_tokens;
  }
  summary["provenance"] = provenance_json(threads);
  write_file_atomic(out + "/summary.json", json::dump(summary, 2) + "\n");
  fmt::print("validation loss {:.6f} perplexity {:.3f} after {} steps ({})\n", v,
             std::exp(std::min(v, 20.0)), trainer.step(), eval.what);
  if (run.data.eval_full)
    fmt::print("full validation loss {:.6f} perplexity {:.3f} ({} tokens)\n", full,
               std::exp(std::min(full, 20.0)), full_tokens);
  fmt::print("weights: {}/model.safetensors\ncheckpoint: {}\n", out, checkpoint_path_in(out));
}

}  // namespace

// The train command on one rank; `agreed` is set once every rank is known to run the same
// settings (from then on an error every rank raises alike is reported once instead of aborting).
static int train_on_rank(int argc, char** argv, int start, World& world, bool& agreed) {
  Flags f(
      "train",
      "Train a micro-LM. Settings come from --config (a JSON file; train/lm/README.md, section\n"
      "\"Run configuration\", lists every key) or --preset, and flags (flags given\n"
      "explicitly override the config file or the preset; --config and --preset together are\n"
      "refused: each names a whole set of sizes).\n\n" +
          preset_help_text());
  declare_train_flags(f);
  if (!f.parse(argc, argv, start)) {
    if (world.rank() == 0) fmt::print("{}", f.help());
    return 0;
  }
  InitialModel init;
  RunConfig run = train_run_from_flags(f, init);
  // Every rank must be asked the same before anything is refused or run (ranks.h).
  check_same_flags(world, f, to_json(run));
  agreed = true;
  apply_layout_flags(f, world.size(), run);  // and run.validate(): before the data is read
  // The thread count: --threads, the environment, else sized to the run (one per GFLOP a step).
  const ThreadChoice thread_choice = apply_threads_for_run(f, run);
  // Training steps and the evaluations after them run in the config's matmul precision, held
  // until the command returns (a config file asking for bf16 on a CPU without it is refused here).
  check_precision_supported(run.training.precision, "training.precision");
  const MatmulPrecisionScope precision(run.training.precision);
  // Sizes the machine cannot hold: refused before the data is read too (the tokenizer's size is
  // at most the vocab asked for; the Trainer checks again with the real one).
  check_memory_fits(
      estimate_memory(run.model, run.training.batch),
      fmt::format("training {} with batch {}", run.model.describe(), run.training.batch));
  const bool writes = world.rank() == 0;  // rank 0 prints and writes the run's files
  refuse_replacing_a_run(f, world);
  const std::string out = f.get("output-dir");
  const bool resuming = !f.get("resume").empty(), overwrite = f.get_bool("overwrite");
  Splits data = load_train_data(f, world, run, init.tokenizer_json);
  const LMTrainingConfig& cfg = run.training;
  TrainSamples samples(f, data.corpus.tokenizer, cfg.seed);
  // Nothing in the output folder changes until the checkpoint to resume from passed every check:
  // a refused resume leaves config.json and steps.jsonl as they were.
  MicroLMTrainer trainer(run, data.train, &world.collectives());
  if (init.model) load_weights(init.dir + "/model.safetensors", trainer.model());
  if (resuming) trainer.load_checkpoint(f.get("resume"));
  trainer.set_skip_nonfinite(f.get_bool("skip-nonfinite"));
  if (writes) write_run_start(out, overwrite, resuming, run, data, trainer.step());
  Progress progress(f.get_bool("quiet") || !writes, writes ? out + "/steps.jsonl" : "", resuming);
  progress.set_prior_seconds(trainer.wall_seconds());
  progress.message(
      fmt::format("training {} ({} parameters) for {} steps on {} ({} train ids), {}, "
                  "OMP_WAIT_POLICY={}",
                  run.model.describe(), trainer.model().parameter_count(), cfg.steps,
                  data.description, data.train.size(), thread_choice.describe(),
                  std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset"));
  if (world.size() > 1 || cfg.accum > 1) progress.message(layout_line(world, trainer));
  const EvalWindows eval = validation_windows(run, data);
  const TrainLoop loop{f,     world, run, data, eval, samples, progress, checkpoint_path_in(out),
                       writes};
  // Ctrl-C / SIGTERM stop at a step boundary in one process; over MPI ranks mpirun ends the job
  // (the ranks could not agree on the step to stop at) and the last checkpoint resumes.
  if (world.size() == 1) install_stop_handlers();
  const int64_t startup_peak = restart_peak_resident();  // the steps' own peak is measured apart
  try {
    trainer.run(cfg.steps, [&](const StepLog& log) { after_train_step(loop, trainer, log); });
  } catch (const Interrupted& e) {
    progress.finish();
    trainer.save_checkpoint(loop.ckpt);
    fmt::print(stderr, "depthgrad train: {}; checkpoint saved: {}\nresume with:\n  {}\n", e.what(),
               loop.ckpt,
               resume_command(argc, argv, {"resume"}, {{"resume", loop.ckpt}}, {"overwrite"}));
    return e.exit_code();
  }
  progress.finish();
  // Read before the last checkpoint, which rank 0 assembles in memory; printed last.
  const std::string memory = peak_memory_line(world, startup_peak);  // collective
  trainer.save_checkpoint(loop.ckpt);
  if (!writes) return 0;
  write_run_end(out, run, data, eval, init, trainer, thread_choice.threads);
  fmt::print("{}\n", memory);
  return 0;
}

int cmd_train(int argc, char** argv, int start) {
  World world;  // MPI when started by mpirun/srun, else one process
  return run_on_every_rank(world, "train", [&](bool& agreed) {
    return train_on_rank(argc, argv, start, world, agreed);
  });
}

int cmd_eval(int argc, char** argv, int start) {
  Flags f("eval",
          "Evaluate a checkpoint (model.safetensors or checkpoint.safetensors from depthgrad "
          "train, or the model.safetensors of depthgrad import) on a split.");
  f.add("checkpoint", "",
        "weights or training checkpoint written by depthgrad train, or the model.safetensors of "
        "depthgrad import (required)")
      .add("split", "validation", "train | validation | test")
      .add("windows", "0", "windows of seq_len to evaluate (0 = every window of the split)")
      .add("tokenizer", "",
           "tokenizer.json that encodes the split (default: trained on the data as the model's "
           "run did; an imported or --init-from model: the tokenizer.json beside --checkpoint)");
  add_data_flags(f);
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  apply_threads_flag(f);
  if (f.get("checkpoint").empty()) throw UsageError("--checkpoint is required");
  const std::string path = f.get("checkpoint");
  TrainedModel trained = load_trained_model(path);
  const RunConfig& cfg = trained.config;
  MicroLM& model = *trained.model;
  // The flags' dataset, every id, with the tokenizer alphabet and held-out fraction the model
  // was trained with (final weights record the run's data section; a training checkpoint's run
  // is in the config.json beside it), so the tokenizer is the model's.
  RunConfig recorded;
  if (auto it = trained.metadata.find("depthgrad.config"); it != trained.metadata.end()) {
    const json::Value saved = json::parse(it->second, path);
    if (const json::Value* data = saved.find("data")) {
      recorded = run_config_from_json(saved, path);
      // Written before the key existed: the reference's alphabet was the only one.
      if (!data->find("full_byte_alphabet")) recorded.data.full_byte_alphabet = false;
    }
  }
  const std::string beside = (std::filesystem::path(path).parent_path() / "config.json").string();
  if (!trained.metadata.count("depthgrad.tokenizer_sha256") && file_exists(beside))
    recorded = run_config_from_json(json::parse(read_file(beside), beside), beside);
  RunConfig on;  // --dataset; the recorded held-out fraction unless --validation-fraction
  on.data.full_byte_alphabet = recorded.data.full_byte_alphabet;
  on.data.validation_fraction = recorded.data.validation_fraction;
  apply_run_config_flags(f, on);
  const DataConfig& split_data = on.data;
  const DataLocation where = resolve_data_location(f, is_builtin_dataset(split_data.dataset));
  const std::string tokenizer_json = f.given("tokenizer") ? read_file(f.get("tokenizer"))
                                                          : given_tokenizer(trained.metadata, path);
  Splits data = load_splits(split_data, where, static_cast<int>(cfg.model.vocab), tokenizer_json);
  check_tokenizer_sha256(trained, path, data.corpus.tokenizer_sha256, "this data gives");
  const std::string split = f.get("split");
  const std::vector<int32_t>* ids = split == "train"        ? &data.train
                                    : split == "validation" ? &data.validation
                                    : split == "test"       ? &data.test
                                                            : nullptr;
  if (!ids)
    throw UsageError(fmt::format("--split: expected train, validation or test, got '{}'", split));
  const int64_t windows = f.get_int("windows");
  const int64_t n = static_cast<int64_t>(ids->size());
  auto starts = windows > 0 ? reference_eval_starts(n, cfg.model.seq_len, windows)
                            : full_eval_starts(n, cfg.model.seq_len);
  double loss = evaluate_windows(model, *ids, starts, cfg.model.seq_len);
  fmt::print("{} {}: loss {:.6f} perplexity {:.3f} over {} tokens ({} windows of {})\n", path,
             split, loss, std::exp(std::min(loss, 20.0)),
             static_cast<int64_t>(starts.size()) * cfg.model.seq_len, starts.size(),
             cfg.model.seq_len);
  return 0;
}

int cmd_tokenize(int argc, char** argv, int start) {
  Flags f("tokenize",
          "Byte-level BPE identical to Hugging Face tokenizers (trained with all 256 bytes in its\n"
          "alphabet, so any text round-trips, unless --reference-alphabet).\n"
          "  --action train   train on --input files (default: WikiText-2 train + Tiny "
          "Shakespeare) -> --output tokenizer.json\n"
          "  --action encode  print the ids of --input (or --text) under --tokenizer\n"
          "  --action decode  print the text of --ids (comma-separated) under --tokenizer");
  f.add("action", "train", "train | encode | decode")
      .add("input", "", "comma-separated text files (train: each file is one sequence)")
      .add("text", "", "text to encode")
      .add("ids", "", "ids to decode, e.g. 60,261,1")
      .add("tokenizer", "", "tokenizer.json for encode/decode")
      .add("output", "tokenizer.json", "where train writes the tokenizer")
      .add("vocab", "512", "vocabulary size for train")
      .add("min-frequency", "2", "minimum pair count for a merge")
      .add_switch("reference-alphabet",
                  "train: only the bytes the input holds (the reference's tokenizer; other bytes "
                  "encode to <unk>) instead of all 256")
      .add("dataset-dir", "", "data directory for the default training corpus");
  add_overwrite_flag(f, "the --output file of --action train (written over)");
  add_threads_flag(f);
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  apply_threads_flag(f);
  const std::string action = f.get("action");
  auto split_list = [](const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
      size_t e = s.find(',', b);
      out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    return out;
  };
  if (f.get_bool("overwrite") && action != "train")
    throw UsageError("--overwrite: only --action train writes a file (--output)");
  if (action == "train") {
    const std::string output = f.get("output");
    std::error_code ec;
    if (!f.get_bool("overwrite") &&
        std::filesystem::exists(std::filesystem::symlink_status(output, ec)))
      throw UsageError(fmt::format(
          "--output: {} exists: replace it with --overwrite, or give another --output", output));
    std::vector<std::string> texts;
    if (f.get("input").empty()) {
      std::string dir = resolve_data_dir(f.get("dataset-dir"));
      texts.push_back(load_dataset_file(dir, "wikitext-2/train.txt"));
      texts.push_back(load_dataset_file(dir, "tiny_shakespeare.txt"));
    } else {
      for (const std::string& p : split_list(f.get("input"))) texts.push_back(read_file(p));
    }
    std::vector<std::string_view> views(texts.begin(), texts.end());
    auto t0 = std::chrono::steady_clock::now();
    BpeTokenizer tok = train_bpe(
        views, static_cast<int>(f.get_int("vocab")), static_cast<int>(f.get_int("min-frequency")),
        {"<pad>", "<unk>", "<bos>", "<eos>"}, !f.get_bool("reference-alphabet"));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tok.save(output);
    auto merges = tok.merges();
    fmt::print("trained BPE-{} ({} merges) in {:.3f} s -> {}\n", tok.vocab_size(), merges.size(),
               secs, output);
    return 0;
  }
  if (f.get("tokenizer").empty()) throw UsageError("--tokenizer is required for encode and decode");
  BpeTokenizer tok = BpeTokenizer::load(f.get("tokenizer"));
  if (action == "encode") {
    std::string text = f.given("text") ? f.get("text") : read_file(f.get("input"));
    std::vector<int32_t> ids = tok.encode(text);
    fmt::print("{}\n", fmt::join(ids, ","));
    fmt::print(stderr, "{} ids\n", ids.size());
    return 0;
  }
  if (action == "decode") {
    std::vector<int32_t> ids;
    for (const std::string& s : split_list(f.get("ids"))) {
      try {
        ids.push_back(static_cast<int32_t>(std::stol(s)));
      } catch (const std::exception&) {
        throw UsageError(fmt::format("--ids: '{}' is not an id", s));
      }
    }
    fmt::print("{}\n", tok.decode(ids));
    return 0;
  }
  throw UsageError(fmt::format("--action: expected train, encode or decode, got '{}'", action));
}

}  // namespace dg::cli
