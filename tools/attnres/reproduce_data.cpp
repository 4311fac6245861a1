// The reproduction's inputs and memory: the corpus it trains on (prepare_data) and the state file
// of finished arms that lets a stopped run resume, over one process or many MPI ranks (ArmStore).
// It does not train or score anything (reproduce.cpp, reproduce_result.cpp do).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "tools/attnres/reproduce_internal.h"
#include "train/io/files.h"

namespace dg::reproduce_detail {

using json::Object;
using json::Value;

Corpus prepare_data(const ReproduceOptions& opt, const Say& say) {
  CorpusOptions co;
  co.data_dir = opt.data_dir;
  co.cache_dir = opt.cache_dir;
  co.vocab_size = static_cast<int>(opt.config.model.vocab);
  co.train_limit = opt.config.data.train_limit;
  co.eval_limit = opt.config.data.eval_limit;
  co.full_byte_alphabet = opt.config.data.full_byte_alphabet;
  Corpus corpus = load_wikitext_corpus(co);
  say(fmt::format(
      "tokenizer: BPE-{} {} in {:.2f} s; {} train ids ({} used), {} validation ids ({} used); "
      "encoded in {:.2f} s{}",
      corpus.tokenizer.vocab_size(), corpus.tokenizer_from_cache ? "loaded from cache" : "trained",
      corpus.tokenizer_seconds, fmt_int(corpus.train_total),
      fmt_int(static_cast<int64_t>(corpus.train.size())), fmt_int(corpus.validation_total),
      fmt_int(static_cast<int64_t>(corpus.validation.size())), corpus.encode_seconds,
      corpus.ids_from_cache ? " (cache)" : ""));
  return corpus;
}

ArmStore::ArmStore(std::string path, Value key, int rank, int ranks)
    : path_(std::move(path)), key_(std::move(key)) {
  state_["key"] = key_;
  state_["completed"] = Object{};
  if (path_.empty()) return;
  own_path_ = ranks > 1 ? fmt::format("{}.rank{}", path_, rank) : path_;
  read_from_disk();
}

void ArmStore::add(uint64_t seed, const std::string& arm, const Value& result) {
  state_["completed"][std::to_string(seed)][arm] = result;
  if (path_.empty()) return;
  write_file_atomic(own_path_, json::dump(state_, 1));
  if (own_path_ != path_) {
    // One rank at a time reads what the others have finished since and rewrites <path>.
    const DirectoryLock lock(directory().string());
    read_from_disk();
    write_file_atomic(path_, json::dump(state_, 1));
  }
}

void ArmStore::finish(const std::vector<Value>& per_seed) {
  for (const Value& seed_result : per_seed)
    for (const auto& [name, arm] : seed_result.as_object())
      if (name != "seed")
        state_["completed"][std::to_string(seed_result.at("seed").as_int())][name] = arm;
  if (path_.empty()) return;
  write_file_atomic(path_, json::dump(state_, 1));
  for (const std::string& f : rank_files()) std::filesystem::remove(f);
}

std::filesystem::path ArmStore::directory() const {
  const std::filesystem::path p(path_);
  return p.has_parent_path() ? p.parent_path() : ".";
}

std::vector<std::string> ArmStore::rank_files() const {
  std::vector<std::string> out;
  const std::filesystem::path dir = directory();
  const std::string prefix = std::filesystem::path(path_).filename().string() + ".rank";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                    [](char c) { return c >= '0' && c <= '9'; }))
      out.push_back((dir / name).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ArmStore::read_from_disk() {
  std::vector<std::string> files;
  if (file_exists(path_)) files.push_back(path_);
  for (const std::string& f : rank_files()) files.push_back(f);
  for (const std::string& f : files) {
    const Value saved = json::parse(read_file(f), f);
    const Value* key = saved.is_object() ? saved.find("key") : nullptr;
    if (!key || !(*key == key_)) {
      std::string what;
      for (const std::string& d : json_differences(key ? *key : Value(), key_))
        what += (what.empty() ? "" : "; ") + d;
      throw std::invalid_argument(fmt::format(
          "--state-file: {} belongs to a run with other settings (state file vs this run: {}); "
          "use a new state file",
          f, what));
    }
    const Value* completed = saved.find("completed");
    if (!completed || !completed->is_object())
      throw std::invalid_argument(
          fmt::format("--state-file: {}: no \"completed\" object of finished arms", f));
    for (const auto& [seed, arms] : completed->as_object()) {
      if (!arms.is_object())
        throw std::invalid_argument(
            fmt::format("--state-file: {}: completed.{} is not an object of arms", f, seed));
      for (const auto& [arm, result] : arms.as_object())
        if (!find(seed, arm)) state_["completed"][seed][arm] = result;
    }
  }
}

const Value* ArmStore::find(const std::string& seed, const std::string& arm) const {
  const Value* done = state_.at("completed").find(seed);
  return done ? done->find(arm) : nullptr;
}

}  // namespace dg::reproduce_detail
