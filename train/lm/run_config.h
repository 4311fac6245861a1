// RunConfig: everything that decides what a training run computes, in one value with one JSON
// mapping: the model (MicroLMConfig), the training (steps, batch, AdamW, schedule, clipping,
// init, seed) and the data (dataset, limits, evaluation windows). Named presets hang on it.
// It does not hold where things live (data and cache directories, output paths), thread counts
// or progress callbacks: those change neither a result nor a resume key.
//
// Every setting is declared once, as a row of run_config_settings() (train/settings.h): its
// section and key, type, range and doc, and the struct field it reads; the default is the field's
// initializer below. The JSON writer and reader, the per-setting checks of validate(), the
// `depthgrad train` flags and their --help lines, and the README's table check all come from
// those rows. JSON, every key optional when read (absent = the default):
//   {"preset": name of the preset the sizes came from (only when one was used),
//    "model": {...}, "training": {...}, "data": {...}}   (the rows' keys, in the rows' order)
// Reading refuses unknown keys, wrong types and configs validate() refuses, naming the key.
//
// The vocabulary size is model.vocab: the BPE tokenizer is trained to it and the model then takes
// the tokenizer's size (one field, so a data vocabulary and a model vocabulary cannot disagree).
//
// nn/'s AttentionConfig (dim, heads, kv_heads, rope, bias) is the attention layer's own
// arguments, as Linear's are: MicroLM fills it from MicroLMConfig, and nn/ may not include train/,
// so it is not a second declaration of these settings.
//
// evolve's Genome (tools/attnres/evolve/genome.h) is a RunConfig whose genes are fields of it:
// model mode, dim, layers, heads, kv_heads; training lr, schedule kind, steps, batch.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/lm/micro_lm.h"
#include "tensor/gemm_kernels.h"
#include "train/io/json.h"
#include "train/optim.h"
#include "train/settings.h"
#include "train/training_config.h"

namespace dg {

// How weights start: the reference's torch draw order (parity) or name-keyed draws that make
// block and rd arms start as the same function (identical).
enum class InitScheme { parity, identical };
InitScheme parse_init_scheme(const std::string& text);
const char* init_scheme_name(InitScheme s);

// The training of a run: the loop's settings (TrainingConfig, train/training_config.h: steps,
// batch, accum, clip, zero, seed, precision) and the LM's own: AdamW, its schedule, how the
// weights start and how the windows are cut. Defaults are the reference's
// (tools/attnres/PROTOCOL.md §3): 30 AdamW steps of batch 4 at a constant 6e-4, clipping at 1,
// torch-parity init, seed 42. MicroLMTrainer builds the AdamW and the schedule from it.
struct LMTrainingConfig : TrainingConfig {
  LMTrainingConfig() { clip = 1.0; }  // the loop's default is no clipping; the reference clips
  AdamWConfig adamw;                  // adamw.lr is the peak learning rate
  // kind, warmup_steps and min_lr_ratio; its lr and total_steps are always adamw.lr and steps
  // (MicroLMTrainer sets them), so they are not part of the JSON.
  Schedule schedule;
  InitScheme init = InitScheme::parity;
  bool sequential = false;  // consecutive windows instead of the reference's random windows
};

// The warm-up a command gives a schedule when none is asked for: 5% of the steps (at least one)
// for cosine, none for constant.
int64_t default_warmup_steps(Schedule::Kind kind, int64_t steps);

// The data of a run. Defaults: WikiText-2, every id, the reference's 32 evaluation windows, a
// tokenizer whose alphabet is all 256 bytes.
struct DataConfig {
  // wikitext-2 | tiny-shakespeare | a path: your own text file or a folder of train.txt,
  // validation.txt (or valid.txt, val.txt) and optionally test.txt (train/lm/data/text_corpus.h)
  std::string dataset = "wikitext-2";
  // Own text without a validation file: the last fraction of it (from a line start) is held out.
  double validation_fraction = 0.1;
  // true: the BPE alphabet is all 256 bytes, so any text round-trips; false: only the bytes the
  // tokenizer's training text holds, as the reference's tokenizer (the parity protocol's).
  bool full_byte_alphabet = true;
  int64_t train_limit = 0;    // train ids used (the first ones); 0 = all
  int64_t eval_limit = 0;     // validation (and test) ids used; 0 = all
  int64_t eval_windows = 32;  // windows of seq_len in the evaluation; 0 = every window
  bool eval_full = false;     // also evaluate every window of the validation split
};

struct RunConfig {
  // The preset the sizes started from (apply_run_preset), or empty: a record of where the numbers
  // came from; the numbers themselves are in model and training. Written to JSON only when set.
  std::string preset;
  MicroLMConfig model;
  LMTrainingConfig training;
  DataConfig data;

  // Throws std::invalid_argument naming the first key that is out of range (from the settings'
  // rows) or inconsistent (heads dividing dim, kv_heads dividing heads, an empty dataset).
  // Every command calls it before it loads data or builds a model.
  void validate() const;
};

// One training step's floating-point operations as the thread rule reads them (threads_for_work
// in tensor/threads.h): 6 · parameters · batch · seq_len, i.e. 2 per parameter and token forward
// and 4 backward; attention's own T² term and the elementwise ops are left out. A micro-batch's
// work: gradient accumulation repeats it without making any op bigger.
double estimated_step_flops(const RunConfig& config);

// Every setting of a run, one row each, in the JSON's key order (train/lm/run_config.cpp).
const SettingsTable<RunConfig>& run_config_settings();

// The three sections and the whole config, in the key order of the JSON above.
json::Value model_json(const MicroLMConfig& model);
json::Value training_json(const LMTrainingConfig& training);
json::Value data_json(const DataConfig& data);
json::Value to_json(const RunConfig& config);
// The inverse of to_json; absent keys keep their defaults (model.kv_heads defaults to
// model.heads). Errors name `source` and the key ("cfg.json: training.steps: ...").
RunConfig run_config_from_json(const json::Value& value, const std::string& source = "run config");
// The keys each section accepts, in the JSON's order: {"model", {"vocab", ...}}, {"training", ...},
// {"data", ...}. The reader refuses any other; the "Run configuration" table of train/README.md
// lists each (a test checks each row against run_config_settings()).
const std::vector<std::pair<std::string, std::vector<std::string>>>& run_config_keys();

// Named presets: the sizes of a run (model vocab, dim, layers, heads, kv_heads, seq_len,
// expansion, and training.batch), one table shared by every command (train, reproduce, evolve,
// bench). A preset sets only those fields; everything else (steps, schedule, lr, ...) stays the
// command's. "micro" is the reference's model and run (RunConfig{} has its sizes), "mini" about 1M
// parameters, "small" and "base" the benchmark's models. The table also carries the benchmark's
// warm-up and timed steps per preset.
struct RunPreset {
  const char* name;
  int64_t vocab, dim, layers, heads, seq_len, expansion, batch;
  int64_t bench_warmup, bench_timed;  // `depthgrad bench`: untimed and timed steps
  const char* note;                   // what the preset is for, one phrase
};
const std::vector<RunPreset>& run_presets();
const std::vector<std::string>& run_preset_names();
const RunPreset& find_run_preset(const std::string& name);  // throws listing the names
// Sets the preset's fields of `config` (kv_heads = heads) and records its name in config.preset.
void apply_run_preset(RunConfig& config, const std::string& name);
// RunConfig{} with the preset applied; run_preset("micro") has RunConfig{}'s numbers.
RunConfig run_preset(const std::string& name);
// The table for --help, one line per preset (no final newline), generated from run_presets(): its
// sizes and its exact parameter count in rd_attnres and block_attnres
// (MicroLMConfig::parameter_count).
std::string run_preset_help();

}  // namespace dg
