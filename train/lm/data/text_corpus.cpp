// Own-text corpora: reading, splitting by position, tokenizer and ids through the shared cache
// (see text_corpus.h).
#include "train/lm/data/text_corpus.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/sha256.h"

namespace dg {

namespace {

std::string read_text_file(const std::string& path, const char* role) {
  const std::string text = read_file(path);
  if (text.empty()) throw std::runtime_error(fmt::format("{} file {} is empty", role, path));
  return text;
}

// The byte where the held-out tail starts: (1 - fraction) of the text, moved forward to the
// start of the next line when there is one, else back to a UTF-8 character start.
size_t held_out_start(const std::string& text, double fraction) {
  size_t cut = static_cast<size_t>(std::floor(static_cast<double>(text.size()) * (1 - fraction)));
  if (cut >= text.size()) return text.size();
  if (cut > 0 && text[cut - 1] == '\n') return cut;
  if (size_t newline = text.find('\n', cut);
      newline != std::string::npos && newline + 1 < text.size())
    return newline + 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

}  // namespace

const std::vector<std::string>& text_validation_file_names() {
  static const std::vector<std::string> names{"validation.txt", "valid.txt", "val.txt"};
  return names;
}

bool is_builtin_dataset(const std::string& dataset) {
  return dataset == "wikitext-2" || dataset == "tiny-shakespeare";
}

TextSplit read_text_split(const std::string& path, double fraction) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec), is_file = fs::is_regular_file(path, ec);
  if (!is_dir && !is_file)
    throw std::runtime_error(fmt::format(
        "dataset '{}' is neither wikitext-2, tiny-shakespeare nor an existing text file or folder",
        path));
  TextSplit s;
  std::string train_path = path, validation_path;
  std::string test_path;
  if (is_dir) {
    train_path = (fs::path(path) / "train.txt").string();
    if (!file_exists(train_path))
      throw std::runtime_error(fmt::format(
          "dataset folder {} has no train.txt (expected train.txt; validation.txt, valid.txt or "
          "val.txt; optionally test.txt)",
          path));
    for (const std::string& name : text_validation_file_names()) {
      const std::string candidate = (fs::path(path) / name).string();
      if (!file_exists(candidate)) continue;
      if (!validation_path.empty())
        throw std::runtime_error(
            fmt::format("dataset folder {} has two validation files ({} and {}); keep one", path,
                        fs::path(validation_path).filename().string(), name));
      validation_path = candidate;
    }
    if (file_exists((fs::path(path) / "test.txt").string()))
      test_path = (fs::path(path) / "test.txt").string();
  }
  const std::string train_text = read_text_file(train_path, "train");
  const std::string train_name = fs::path(train_path).filename().string();
  if (!validation_path.empty()) {
    s.train = train_text;
    s.validation = read_text_file(validation_path, "validation");
    s.sha256[train_name] = sha256_hex(s.train);
    s.sha256[fs::path(validation_path).filename().string()] = sha256_hex(s.validation);
    s.description = fmt::format("{}: {} and {}", path, train_name,
                                fs::path(validation_path).filename().string());
  } else {
    if (!(fraction > 0 && fraction <= 0.5))
      throw std::runtime_error(fmt::format(
          "validation fraction must be in (0, 0.5], got {} (dataset {} has no validation file)",
          fraction, path));
    const size_t cut = held_out_start(train_text, fraction);
    s.train = train_text.substr(0, cut);
    s.validation = train_text.substr(cut);
    if (s.train.empty() || s.validation.empty())
      throw std::runtime_error(fmt::format(
          "{}: holding out the last {} of {} bytes leaves the {} split empty; give more text",
          train_path, fraction, train_text.size(), s.train.empty() ? "train" : "validation"));
    // The parts are keyed by the whole file's hash and the cut, so the same file and fraction
    // give the same cache entries.
    const std::string whole = sha256_hex(train_text);
    s.sha256[train_name] = whole;
    s.sha256[fmt::format("{}[0:{}]", train_name, cut)] = sha256_hex(s.train);
    s.sha256[fmt::format("{}[{}:]", train_name, cut)] = sha256_hex(s.validation);
    s.description = fmt::format("{}: last {:g}% held out for validation ({} of {} bytes)",
                                train_path, fraction * 100, s.validation.size(), train_text.size());
  }
  if (!test_path.empty()) {
    s.test = read_text_file(test_path, "test");
    s.sha256["test.txt"] = sha256_hex(s.test);
  } else {
    s.test = s.validation;
  }
  return s;
}

Corpus load_text_corpus(const std::string& path, double validation_fraction,
                        const CorpusOptions& options, TextSplit* split_out) {
  const TextSplit split = read_text_split(path, validation_fraction);
  Corpus c;
  c.dataset_sha256 = split.sha256;
  const std::string train_sha = sha256_hex(split.train),
                    validation_sha = sha256_hex(split.validation),
                    test_sha = sha256_hex(split.test);
  load_or_train_tokenizer(c, options, "text-bpe", train_sha, {split.train});
  const auto t1 = std::chrono::steady_clock::now();
  bool cached = load_or_encode(c, options, split.train, train_sha, c.train);
  cached = load_or_encode(c, options, split.validation, validation_sha, c.validation) && cached;
  cached = load_or_encode(c, options, split.test, test_sha, c.test) && cached;
  c.ids_from_cache = cached;
  c.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  c.train_total = static_cast<int64_t>(c.train.size());
  c.validation_total = static_cast<int64_t>(c.validation.size());
  c.test_total = static_cast<int64_t>(c.test.size());
  auto cut = [](std::vector<int32_t>& ids, int64_t limit) {
    if (limit > 0 && static_cast<int64_t>(ids.size()) > limit)
      ids.resize(static_cast<size_t>(limit));
  };
  cut(c.train, options.train_limit);
  cut(c.validation, options.eval_limit);
  cut(c.test, options.eval_limit);
  if (split_out) *split_out = split;
  return c;
}

}  // namespace dg
