// What the reproduction's three files share: reproduce.cpp runs it (papers, protocols, arms,
// options, the run), reproduce_data.cpp prepares the corpus and keeps the state file,
// reproduce_result.cpp builds result.json and the files written beside it. Not a public API.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tools/attnres/reproduce.h"
#include "train/io/json.h"
#include "train/lm/data/corpus.h"

namespace dg::reproduce_detail {

using Say = std::function<void(const std::string&)>;

// ---- reproduce_data.cpp

// Step 1: the tokenizer and the encoded splits (from the cache when they are there).
Corpus prepare_data(const ReproduceOptions& opt, const Say& say);

// The state file: {"key": reproduce_resume_key(...), "completed": {"<seed>": {"<arm>": arm}}}.
// Without a path it only remembers in memory.
//
// Over N MPI ranks every rank finishes arms on its own, so each keeps its own file beside the
// run's, <path>.rank<r>: the arms it knows, written after each one it finishes (its own file
// alone, so no two ranks write the same file and no finished arm can be lost). Then, holding a
// lock on the folder (DirectoryLock), it rewrites <path> with everything then on disk: <path>
// alone holds every finished arm whenever no rank is between its two writes, so a copy of it
// can carry the run. Every process, any rank count, reads <path> and every <path>.rank<r> at start,
// so a run stopped on N ranks resumes on M. finish() writes <path> whole and removes the rank
// files: a finished run has one state file, as with one process.
class ArmStore {
 public:
  ArmStore(std::string path, json::Value key, int rank, int ranks);
  const json::Value* find(uint64_t seed, const std::string& arm) const {
    return find(std::to_string(seed), arm);
  }
  void add(uint64_t seed, const std::string& arm, const json::Value& result);
  // Every arm of the run (per_seed: {"seed": s, "<arm>": arm, ...}) into <path>; the rank files
  // go. Called by one process (rank 0) once every rank's arms are in per_seed.
  void finish(const std::vector<json::Value>& per_seed);

 private:
  // The folder of <path>
  std::filesystem::path directory() const;
  // <path>.rank<digits> beside <path>
  std::vector<std::string> rank_files() const;
  // Adds the finished arms of <path> and its rank files (each refused unless its key is this
  // run's); an arm already known is kept as it is.
  void read_from_disk();
  const json::Value* find(const std::string& seed, const std::string& arm) const;

  std::string path_, own_path_;
  json::Value key_;
  json::Value state_;
};

// ---- reproduce_result.cpp

// One arm in the reference's result layout (§6.3) plus depthgrad's training curves and routes.
json::Value arm_json(const ArmResult& r, uint64_t seed);
// 1234567 -> "1,234,567"
std::string fmt_int(int64_t v);
// result.json (without "artifacts", which write_outputs adds).
json::Value assemble_result(const ReproduceOptions& opt, const Corpus& corpus,
                            const std::vector<json::Value>& all_seeds, double wall_seconds);
// The comparison table as printed.
std::string comparison_table(const json::Value& result);
// Step 5: tokenizer.json, metrics.json, result.json, report.md and report.html, each atomically.
void write_outputs(const std::string& dir, const ReproduceOptions& opt, const Corpus& corpus,
                   json::Value& result);

}  // namespace dg::reproduce_detail
