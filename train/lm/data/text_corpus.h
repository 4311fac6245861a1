// Your own text as a corpus: one text file, or a folder holding train.txt, a validation file
// (validation.txt, valid.txt or val.txt) and optionally test.txt. Without a validation file the
// last `validation_fraction` of the train text (cut at a line start) is held out, by position, so
// the split is the same on every run. The tokenizer (all 256 bytes by default, so any text
// round-trips) is trained on the train part only; tokenizer and ids are cached as for the
// built-in sets, keyed by the SHA-256 of the texts. It does not read the built-in sets (corpus.h).
#pragma once
#include <string>

#include "train/lm/data/corpus.h"

namespace dg {

// The validation file names a folder may hold, in the order they are looked for.
const std::vector<std::string>& text_validation_file_names();

// True when `dataset` names one of the built-in sets (wikitext-2, tiny-shakespeare), not a path.
bool is_builtin_dataset(const std::string& dataset);

struct TextSplit {
  std::string train, validation, test;        // test == validation when there is no test file
  std::map<std::string, std::string> sha256;  // file or part ("corpus.txt[train]") -> SHA-256
  std::string description;                    // e.g. "corpus.txt, last 10% held out"
};

// Reads `path` (a file or a folder) and splits it as described above. Throws
// std::runtime_error naming the path and what is wrong: missing, empty, a folder without
// train.txt or with two validation files, a fraction outside (0, 0.5], a split left empty.
TextSplit read_text_split(const std::string& path, double validation_fraction);

// The corpus of `path`: options.data_dir is ignored; vocab_size, min_frequency, cache_dir,
// full_byte_alphabet and the limits (train_limit; eval_limit for validation and test) apply.
// narrative stays empty.
Corpus load_text_corpus(const std::string& path, double validation_fraction,
                        const CorpusOptions& options, TextSplit* split = nullptr);

}  // namespace dg
