// Flags several depthgrad commands share, declared and read in one place so their names, help
// and checks agree: where the data and the tokenizer cache live (reproduce, evolve, train, eval)
// and the thread count (every command that computes). Nothing here runs a command.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/cli/flags.h"
#include "train/lm/run_config.h"
#include "train/lm/text/bpe.h"
#include "train/lm/trained_model.h"

namespace dg::cli {

// --dataset-dir, --cache-dir, --no-cache
Flags& add_data_location_flags(Flags& f);
struct DataLocation {
  std::string data_dir;   // resolved: the flag, else $DEPTHGRAD_DATA, else ./data
  std::string cache_dir;  // resolved cache directory; empty with --no-cache
};
// Resolves the three flags; throws naming --dataset-dir (and the fetch command) when the data
// directory does not exist and the run needs it (own text does not).
DataLocation resolve_data_location(const Flags& f, bool need_data_dir = true);

// --dataset and --validation-fraction: a built-in set or your own text
// (train/lm/data/text_corpus.h), the run config's data.dataset and data.validation_fraction
// (tools/cli/run_config_flags.h).
Flags& add_dataset_flags(Flags& f);

// The tokenizer of a model written by depthgrad: --tokenizer, else the tokenizer.json beside
// `checkpoint`; refused (naming the file) when it is missing, does not fit the model's vocabulary
// or is not the one the model records (generate, export).
struct ModelTokenizer {
  std::string path, json;
  BpeTokenizer tokenizer;
};
ModelTokenizer model_tokenizer(const Flags& f, const TrainedModel& trained,
                               const std::string& checkpoint);

// --threads. With sized_to_run the default named in --help is the run's size
// (apply_threads_for_run), else the physical cores.
Flags& add_threads_flag(Flags& f, bool sized_to_run = false);
// --threads VALUE (or DEPTHGRAD_THREADS, else physical cores): applies it and returns the count.
int apply_threads_flag(const Flags& f);

// The thread count of a training run and where it came from, for the run's first line.
struct ThreadChoice {
  int threads = 1;
  std::string source;  // "--threads", "DEPTHGRAD_THREADS or OMP_NUM_THREADS", or the size rule
  std::string describe() const;  // "1 thread(s) (for the model's size: 0.2 GFLOP a step)"
};
// train, reproduce and evolve: --threads VALUE, else DEPTHGRAD_THREADS / OMP_NUM_THREADS, else
// threads_for_work(estimated_step_flops(run)) (tensor/threads.h: one thread per GFLOP of a step,
// up to the physical cores). Applies the count and returns it with its source.
ThreadChoice apply_threads_for_run(const Flags& f, const RunConfig& run);

// The command line that resumes an interrupted run: argv as given (shell-quoted), without the
// flags named in `drop` (and their values) and the switches named in `drop_switches`, with
// `--<flag> <value>` for each of `add` appended.
std::string resume_command(int argc, char** argv, const std::vector<std::string>& drop,
                           const std::vector<std::pair<std::string, std::string>>& add,
                           const std::vector<std::string>& drop_switches = {});

// Parses "1-10", "1,2,5", "3" into seeds; throws naming `flag` on anything else.
std::vector<uint64_t> parse_seed_list(const std::string& text, const std::string& flag);

}  // namespace dg::cli
