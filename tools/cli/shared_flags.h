// Flags several depthgrad commands share, declared and read in one place so their names, help
// and checks agree: where the data and the tokenizer cache live (reproduce, evolve, train, eval)
// and the thread count (every command that computes). Nothing here runs a command.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/cli/flags.h"
#include "train/text/bpe.h"
#include "train/trained_model.h"

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

// --dataset and --validation-fraction: a built-in set or your own text (train/data/text_corpus.h),
// the run config's data.dataset and data.validation_fraction (tools/cli/run_config_flags.h).
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

// --threads
Flags& add_threads_flag(Flags& f);
// --threads VALUE (or DEPTHGRAD_THREADS, else physical cores): applies it and returns the count.
int apply_threads_flag(const Flags& f);

// The command line that resumes an interrupted run: argv as given (shell-quoted), without the
// flags named in `drop` (and their values) and the switches named in `drop_switches`, with
// `--<flag> <value>` for each of `add` appended.
std::string resume_command(int argc, char** argv, const std::vector<std::string>& drop,
                           const std::vector<std::pair<std::string, std::string>>& add,
                           const std::vector<std::string>& drop_switches = {});

// Parses "1-10", "1,2,5", "3" into seeds; throws naming `flag` on anything else.
std::vector<uint64_t> parse_seed_list(const std::string& text, const std::string& flag);

}  // namespace dg::cli
