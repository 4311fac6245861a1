// The WikiText-2 corpus of the reproduction (tools/attnres/PROTOCOL.md §1.2–1.3): a byte-level
// BPE trained on the whole WikiText-2 train text plus Tiny Shakespeare, every split encoded as one
// string, then truncated. Tokenizers and encoded splits are cached on disk under the cache
// directory, keyed by the SHA-256 of the texts and of the tokenizer, so a changed text or
// tokenizer is never served from a stale cache (unlike the reference, §8 item 9). The cache never
// lives in the data directory, which may be read-only.
// It does not download data (train/lm/data/data_files.h says how) and does not sample batches.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "train/lm/text/bpe.h"

namespace dg {

struct CorpusOptions {
  std::string data_dir;   // already resolved
  std::string cache_dir;  // already resolved; empty disables caching
  int vocab_size = 512;
  int min_frequency = 2;
  int64_t train_limit = 120000;      // 0 keeps every id
  int64_t eval_limit = 8000;         // validation and test
  int64_t narrative_limit = 120000;  // Tiny Shakespeare
  // false: the reference's tokenizer (its alphabet is the bytes the texts hold; the parity
  // protocol). true: all 256 bytes, so any text round-trips (train/lm/text/bpe.h).
  bool full_byte_alphabet = false;
  // Non-empty: a given tokenizer.json (an imported model's) encodes the texts; none is trained,
  // and vocab_size, min_frequency and full_byte_alphabet are not used.
  std::string tokenizer_json;
};

struct Corpus {
  BpeTokenizer tokenizer;
  std::string tokenizer_json;
  std::string tokenizer_sha256;
  std::string tokenizer_cache_path;  // where the tokenizer is cached (empty without a cache)
  std::vector<int32_t> train, validation, test, narrative;  // truncated
  int64_t train_total = 0, validation_total = 0, test_total = 0,
          narrative_total = 0;                        // before truncation
  std::map<std::string, std::string> dataset_sha256;  // relative path -> sha256
  bool tokenizer_from_cache = false;
  bool ids_from_cache = false;
  double tokenizer_seconds = 0;  // training or loading
  double encode_seconds = 0;
};

Corpus load_wikitext_corpus(const CorpusOptions& options);

// The pieces load_wikitext_corpus and load_text_corpus (train/lm/data/text_corpus.h) share.
// The tokenizer for (options, texts): from cache_dir/tokenizers/<name>-<vocab>-<key>.json when it
// is there and reads back, else trained on `texts` and written there. `key_material` names the
// texts (their SHA-256s); the key adds the algorithm version, vocab, min_frequency, specials and
// the alphabet. Fills corpus.tokenizer, tokenizer_json, tokenizer_sha256, tokenizer_cache_path,
// tokenizer_from_cache and tokenizer_seconds.
void load_or_train_tokenizer(Corpus& corpus, const CorpusOptions& options, const std::string& name,
                             const std::string& key_material,
                             const std::vector<std::string_view>& texts);
// The ids of `text` under corpus.tokenizer, from cache_dir/ids/ (keyed by text_sha256 and the
// tokenizer's SHA-256) or encoded and written there. Returns true when they came from the cache.
bool load_or_encode(const Corpus& corpus, const CorpusOptions& options, const std::string& text,
                    const std::string& text_sha256, std::vector<int32_t>& ids);

// The cached ids file: "DGIDS001" | uint64 count | int32 ids... | 32-byte SHA-256 of the ids bytes.
std::string serialize_ids(const std::vector<int32_t>& ids);
// Reads a cached ids file; false (the caller re-encodes) when it is truncated, corrupted or not
// one.
bool deserialize_ids(const std::string& bytes, std::vector<int32_t>& ids);

}  // namespace dg
