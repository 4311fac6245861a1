// Own-text corpora (train/lm/data/text_corpus.h): a file split by position, a folder of named
// files, the shared cache keyed by content, and the errors that name the path.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/io/files.h"
#include "train/lm/data/text_corpus.h"

using namespace dg;
using dg::test::contains;
using dg::test::error_of;

namespace {

std::string lines(const std::string& prefix, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += prefix + " line " + std::to_string(i) + "\ttab é 😀\n";
  return text;
}

CorpusOptions options(const std::string& cache_dir) {
  CorpusOptions o;
  o.cache_dir = cache_dir;
  o.vocab_size = 300;
  o.full_byte_alphabet = true;
  o.train_limit = o.eval_limit = 0;
  return o;
}

}  // namespace

TEST_CASE("own text: one file, the last fraction held out from a line start, by position") {
  test::TempDir dir("text");
  const std::string text = lines("alpha", 100);
  write_file_atomic(dir.file("corpus.txt"), text);
  const TextSplit s = read_text_split(dir.file("corpus.txt"), 0.1);
  CHECK(s.train + s.validation == text);
  CHECK(s.train.back() == '\n');  // cut at a line start
  const double held = static_cast<double>(s.validation.size()) / static_cast<double>(text.size());
  CHECK(held > 0.08);
  CHECK(held <= 0.1);
  CHECK(s.test == s.validation);
  CHECK(read_text_split(dir.file("corpus.txt"), 0.1).validation == s.validation);  // same cut
  CHECK(read_text_split(dir.file("corpus.txt"), 0.3).validation.size() > s.validation.size());
  // A text without newlines is cut at a character start, never inside a UTF-8 sequence.
  std::string one_line;
  for (int i = 0; i < 200; ++i) one_line += "日本";
  write_file_atomic(dir.file("one.txt"), one_line);
  const TextSplit u = read_text_split(dir.file("one.txt"), 0.1);
  CHECK(u.train + u.validation == one_line);
  CHECK(u.train.size() % 3 == 0);
}

TEST_CASE("own text: a folder of train, validation and test files") {
  test::TempDir dir("text");
  write_file_atomic(dir.file("train.txt"), lines("train", 50));
  write_file_atomic(dir.file("valid.txt"), lines("valid", 10));
  TextSplit s = read_text_split(dir.path.string(), 0.1);
  CHECK(s.train == lines("train", 50));
  CHECK(s.validation == lines("valid", 10));
  CHECK(s.test == s.validation);  // no test.txt
  write_file_atomic(dir.file("test.txt"), lines("test", 5));
  s = read_text_split(dir.path.string(), 0.1);
  CHECK(s.test == lines("test", 5));
  CHECK(s.sha256.count("train.txt") == 1);
  CHECK(s.sha256.count("valid.txt") == 1);
  CHECK(s.sha256.count("test.txt") == 1);
  // Two validation files are ambiguous.
  write_file_atomic(dir.file("validation.txt"), lines("validation", 10));
  CHECK(contains(error_of([&] { read_text_split(dir.path.string(), 0.1); }),
                 "two validation files (validation.txt and valid.txt)"));
  // Without a validation file the train file is split as a single file would be.
  test::TempDir only("text");
  write_file_atomic(only.file("train.txt"), lines("train", 50));
  const TextSplit t = read_text_split(only.path.string(), 0.2);
  CHECK(t.train + t.validation == lines("train", 50));
}

TEST_CASE("own text: errors name the path and what is wrong") {
  test::TempDir dir("text");
  CHECK(contains(error_of([&] { read_text_split(dir.file("nope.txt"), 0.1); }),
                 "is neither wikitext-2, tiny-shakespeare nor an existing text file or folder"));
  CHECK(contains(error_of([&] { read_text_split(dir.path.string(), 0.1); }), "has no train.txt"));
  write_file_atomic(dir.file("empty.txt"), "");
  CHECK(contains(error_of([&] { read_text_split(dir.file("empty.txt"), 0.1); }),
                 "empty.txt is empty"));
  write_file_atomic(dir.file("a.txt"), lines("a", 10));
  CHECK(contains(error_of([&] { read_text_split(dir.file("a.txt"), 0.9); }),
                 "validation fraction must be in (0, 0.5]"));
  write_file_atomic(dir.file("tiny.txt"), "x");
  CHECK(contains(error_of([&] { read_text_split(dir.file("tiny.txt"), 0.1); }), "empty"));
  CHECK(is_builtin_dataset("wikitext-2"));
  CHECK(is_builtin_dataset("tiny-shakespeare"));
  CHECK_FALSE(is_builtin_dataset("wikitext-2/train.txt"));
}

TEST_CASE("own text: tokenizer over all bytes, ids round-trip, cache keyed by content") {
  test::TempDir dir("text"), cache("cache");
  write_file_atomic(dir.file("corpus.txt"), lines("gamma", 80));
  Corpus first = load_text_corpus(dir.file("corpus.txt"), 0.1, options(cache.path.string()));
  CHECK_FALSE(first.tokenizer_from_cache);
  CHECK_FALSE(first.ids_from_cache);
  CHECK(first.tokenizer.vocab_size() > 4 + 256);  // all bytes, then merges
  CHECK(first.tokenizer.vocab_size() <= 300);
  const TextSplit split = read_text_split(dir.file("corpus.txt"), 0.1);
  CHECK(first.tokenizer.decode(first.train) == split.train);
  CHECK(first.tokenizer.decode(first.validation) == split.validation);
  // Bytes the text never holds still round-trip (the alphabet is all 256 bytes).
  const std::string unseen = "ZQ\x01\xff 中文 🚀";
  CHECK(first.tokenizer.decode(first.tokenizer.encode(unseen)) == unseen);
  // The second load comes from the cache and gives the same ids and tokenizer.
  Corpus again = load_text_corpus(dir.file("corpus.txt"), 0.1, options(cache.path.string()));
  CHECK(again.tokenizer_from_cache);
  CHECK(again.ids_from_cache);
  CHECK(again.tokenizer_sha256 == first.tokenizer_sha256);
  CHECK(again.train == first.train);
  CHECK(again.validation == first.validation);
  // Changed content is never served from the stale cache.
  write_file_atomic(dir.file("corpus.txt"), lines("delta", 80));
  Corpus changed = load_text_corpus(dir.file("corpus.txt"), 0.1, options(cache.path.string()));
  CHECK_FALSE(changed.tokenizer_from_cache);
  CHECK(changed.tokenizer_sha256 != first.tokenizer_sha256);
  CHECK(changed.tokenizer.decode(changed.validation) ==
        read_text_split(dir.file("corpus.txt"), 0.1).validation);
  // The reference alphabet is another cache entry (and cannot encode a byte it never saw).
  CorpusOptions reference = options(cache.path.string());
  reference.full_byte_alphabet = false;
  Corpus ref = load_text_corpus(dir.file("corpus.txt"), 0.1, reference);
  CHECK_FALSE(ref.tokenizer_from_cache);
  CHECK(ref.tokenizer.decode(ref.tokenizer.encode(unseen)) != unseen);
}
