// The shared data-location and thread flags (see shared_flags.h).
#include "tools/cli/shared_flags.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "tensor/threads.h"
#include "tools/cli/run_config_flags.h"
#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/lm/data/data_files.h"
#include "train/lm/generate.h"

namespace dg::cli {

Flags& add_data_location_flags(Flags& f) {
  return f.add("dataset-dir", "", "data directory (else $DEPTHGRAD_DATA, else ./data)")
      .add("cache-dir", "",
           "tokenizer/ids cache (else $XDG_CACHE_HOME/depthgrad, else ~/.cache/depthgrad)")
      .add_switch("no-cache", "do not read or write the tokenizer/ids cache");
}

DataLocation resolve_data_location(const Flags& f, bool need_data_dir) {
  DataLocation d;
  d.data_dir = resolve_data_dir(f.get("dataset-dir"));
  if (need_data_dir && !dir_exists(d.data_dir))
    throw std::runtime_error(fmt::format(
        "--dataset-dir: {} does not exist (fetch the data with tools/download-data.sh {})",
        d.data_dir, d.data_dir));
  d.cache_dir = f.get_bool("no-cache") ? "" : resolve_cache_dir(f.get("cache-dir"));
  return d;
}

Flags& add_dataset_flags(Flags& f) {
  return add_run_config_flags(f, {{"", RunConfig{}}}, {"dataset", "validation-fraction"});
}

Flags& add_threads_flag(Flags& f, bool sized_to_run) {
  return f.add("threads", "",
               sized_to_run ? "threads for OpenMP and OpenBLAS (default: DEPTHGRAD_THREADS, else "
                              "OMP_NUM_THREADS, else one per GFLOP of a training step, up to the "
                              "physical cores: 1 for the micro preset)"
                            : "threads for OpenMP and OpenBLAS (default: DEPTHGRAD_THREADS or "
                              "physical cores)");
}

int apply_threads_flag(const Flags& f) {
  if (!f.given("threads")) {
    init_threads_from_env();
    return threads();
  }
  const int n = parse_threads(f.get("threads"), "--threads");
  set_threads(n);
  return n;
}

std::string ThreadChoice::describe() const {
  return fmt::format("{} thread(s) ({})", threads, source);
}

ThreadChoice apply_threads_for_run(const Flags& f, const RunConfig& run) {
  ThreadChoice c;
  if (f.given("threads")) {
    c.threads = parse_threads(f.get("threads"), "--threads");
    c.source = "set by --threads";
  } else if (const int env = threads_from_env(); env > 0) {
    c.threads = env;
    c.source = std::getenv("DEPTHGRAD_THREADS") && *std::getenv("DEPTHGRAD_THREADS")
                   ? "set by DEPTHGRAD_THREADS"
                   : "set by OMP_NUM_THREADS";
  } else {
    const double flops = estimated_step_flops(run);
    c.threads = threads_for_work(flops);
    c.source = fmt::format("chosen for the model's size, {:.1f} GFLOP a step; --threads to set",
                           flops * 1e-9);
  }
  set_threads(c.threads);
  return c;
}

namespace {
// 'text' quoted for a POSIX shell unless it is plain.
std::string shell_quote(const std::string& text) {
  if (!text.empty() &&
      text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "-_./=:,+@%") == std::string::npos)
    return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

std::string resume_command(int argc, char** argv, const std::vector<std::string>& drop,
                           const std::vector<std::pair<std::string, std::string>>& add,
                           const std::vector<std::string>& drop_switches) {
  std::string out = shell_quote(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    bool dropped = false;
    for (const std::string& name : drop) {
      if (arg == "--" + name) {  // "--resume X": the value goes too
        dropped = true;
        if (i + 1 < argc) ++i;
      } else if (arg.rfind("--" + name + "=", 0) == 0) {
        dropped = true;
      }
    }
    for (const std::string& name : drop_switches)
      if (arg == "--" + name || arg.rfind("--" + name + "=", 0) == 0) dropped = true;
    if (!dropped) out += " " + shell_quote(arg);
  }
  for (const auto& [name, value] : add) out += fmt::format(" --{} {}", name, shell_quote(value));
  return out;
}

std::vector<uint64_t> parse_seed_list(const std::string& text, const std::string& flag) {
  std::vector<uint64_t> seeds;
  auto parse_one = [&](const std::string& s) -> uint64_t {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
      throw std::invalid_argument(fmt::format(
          "{}: '{}' is not a seed (expected non-negative integers like 42, 1-10 or 1,2,5)", flag,
          text));
    return std::stoull(s);
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = part.find('-');
    if (dash != std::string::npos) {
      uint64_t lo = parse_one(part.substr(0, dash)), hi = parse_one(part.substr(dash + 1));
      if (hi < lo || hi - lo > 10000)
        throw std::invalid_argument(
            fmt::format("{}: range '{}' is empty or too large", flag, part));
      for (uint64_t s = lo; s <= hi; ++s) seeds.push_back(s);
    } else {
      seeds.push_back(parse_one(part));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<uint64_t> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument(fmt::format("{}: seed list '{}' repeats a seed", flag, text));
  return seeds;
}

ModelTokenizer model_tokenizer(const Flags& f, const TrainedModel& trained,
                               const std::string& checkpoint) {
  const std::string path =
      f.given("tokenizer")
          ? f.get("tokenizer")
          : (std::filesystem::path(checkpoint).parent_path() / "tokenizer.json").string();
  if (!file_exists(path))
    throw std::runtime_error(
        fmt::format("no tokenizer: {} does not exist (pass --tokenizer)", path));
  std::string json = read_file(path);
  BpeTokenizer tokenizer = BpeTokenizer::from_json(json, path);
  check_tokenizer_vocab(trained.config.model.vocab, tokenizer, path);
  check_tokenizer_sha256(trained, checkpoint, sha256_hex(json), path);
  return ModelTokenizer{path, std::move(json), std::move(tokenizer)};
}

}  // namespace dg::cli
