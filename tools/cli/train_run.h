// The steps of `depthgrad train`'s run that another training command reuses (finetune): the data,
// the output folder's rules, the per-step work (log line, evaluation, sample, checkpoint, stop)
// and the start-of-run files. Defined in cmd_train.cpp; train's own flags, its run config and its
// final files stay there.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/cli/flags.h"
#include "tools/cli/progress.h"
#include "tools/cli/train_samples.h"
#include "train/dist/world.h"
#include "train/lm/data/corpus.h"
#include "train/lm/micro_lm_training.h"
#include "train/lm/run_config.h"

namespace dg::cli {

// Token ids of a run config's data: wikitext-2 (train/validation/test splits), tiny-shakespeare
// (first 90% train, last 10% validation and test) or your own text (train/lm/data/text_corpus.h),
// each cut to data.train_limit / eval_limit.
struct Splits {
  Corpus corpus;
  std::vector<int32_t> train, validation, test;
  std::string description;  // where the splits came from, for messages
};

// The validation windows a printed validation loss is computed on, and how to say so.
struct EvalWindows {
  std::vector<int64_t> starts;
  std::string what;
};

// What the training loop needs besides the trainer: the run, its data and where it writes.
struct TrainLoop {
  const Flags& f;
  World& world;
  const RunConfig& run;
  const Splits& data;
  const EvalWindows& eval;
  TrainSamples& samples;
  Progress& progress;
  std::string ckpt;  // <output-dir>/checkpoint.safetensors
  bool writes = false;
};

// A run already in --output-dir is refused before any work (--resume continues it, --overwrite
// replaces it), as rank 0 sees the folder. Called by every rank.
void refuse_replacing_a_run(const Flags& f, World& world);
// The run's token ids, rank 0 first (it fills the tokenizer cache), encoded with
// `tokenizer_json` when given (an imported model's); sets the model's vocabulary to the
// tokenizer's and refuses splits too short for the run.
Splits load_train_data(const Flags& f, World& world, RunConfig& run,
                       const std::string& tokenizer_json);
// Rank 0's files at the start: config.json and tokenizer.json; with --overwrite the old run's
// files go first, and on --resume the step log keeps the lines before the checkpoint's step.
void write_run_start(const std::string& out, bool overwrite, bool resuming, const RunConfig& run,
                     const Splits& data, int64_t resumed_step);
EvalWindows validation_windows(const RunConfig& run, const Splits& data);
// After each step: the step log line, the validation loss and a sample when due, a checkpoint
// when due, and a requested stop.
void after_train_step(const TrainLoop& loop, MicroLMTrainer& trainer, const StepLog& log);
std::string checkpoint_path_in(const std::string& out);  // <out>/checkpoint.safetensors

}  // namespace dg::cli
