// Tokenizer training, split encoding and the on-disk cache (see corpus.h).
#include "train/lm/data/corpus.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>

#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/lm/data/data_files.h"

namespace dg {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Bump when the tokenizer trainer or the encoder changes behaviour: old cache entries stop
// matching.
constexpr const char* kAlgorithmVersion = "depthgrad-bpe-1";
const std::vector<std::string> kSpecials{"<pad>", "<unk>", "<bos>", "<eos>"};

// Writes a cache entry atomically (a concurrent process sees the old entry or the whole new one,
// and two processes writing the same entry write the same bytes). The cache only saves time: an
// entry that cannot be written (a full disk, a folder in the way) leaves the run as it was.
void store_in_cache(const std::string& folder, const std::string& path, const std::string& bytes) {
  try {
    make_dirs(folder);
    write_file_atomic(path, bytes);
  } catch (const std::exception&) {
    // not cached; the next run computes it again
  }
}

void truncate(std::vector<int32_t>& ids, int64_t limit) {
  if (limit > 0 && static_cast<int64_t>(ids.size()) > limit) ids.resize(limit);
}
}  // namespace

std::string serialize_ids(const std::vector<int32_t>& ids) {
  std::string out = "DGIDS001";
  uint64_t n = ids.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  std::string_view body(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  out.append(body);
  Sha256 h;
  h.update(body);
  auto digest = h.finish();
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

// Returns false (and the caller re-encodes) for a missing, truncated or corrupted cache file.
bool deserialize_ids(const std::string& bytes, std::vector<int32_t>& ids) {
  if (bytes.size() < 8 + 8 + 32 || bytes.compare(0, 8, "DGIDS001") != 0) return false;
  uint64_t n;
  std::memcpy(&n, bytes.data() + 8, 8);
  // Compare the count with the bytes present before multiplying: 16 + n * 4 + 32 wraps around
  // for n >= 2^62 and would let a 48-byte file ask for an enormous vector.
  if (n != (bytes.size() - 16 - 32) / 4 || (bytes.size() - 16 - 32) % 4 != 0) return false;
  std::string_view body(bytes.data() + 16, n * 4);
  Sha256 h;
  h.update(body);
  auto digest = h.finish();
  if (std::memcmp(digest.data(), bytes.data() + 16 + n * 4, 32) != 0) return false;
  ids.resize(n);
  if (n > 0) std::memcpy(ids.data(), body.data(), n * 4);  // an empty vector's data() may be null
  return true;
}

void load_or_train_tokenizer(Corpus& c, const CorpusOptions& opt, const std::string& name,
                             const std::string& key_material,
                             const std::vector<std::string_view>& texts) {
  if (!opt.tokenizer_json.empty()) {  // a given tokenizer: nothing to train or cache
    c.tokenizer_json = opt.tokenizer_json;
    c.tokenizer = BpeTokenizer::from_json(c.tokenizer_json, "the given tokenizer.json");
    c.tokenizer_sha256 = sha256_hex(c.tokenizer_json);
    return;
  }
  // The BPE alphabet is the 256 bytes plus the specials: a smaller vocabulary would silently come
  // out at that size (the trainer never drops a byte), so it is refused instead.
  const int min_vocab = 256 + static_cast<int>(kSpecials.size());
  if (opt.vocab_size < min_vocab)
    throw std::invalid_argument(fmt::format(
        "vocab {} is below the {} tokens every byte-level BPE has (256 bytes + {} special tokens)",
        opt.vocab_size, min_vocab, kSpecials.size()));
  auto t0 = Clock::now();
  // The reference alphabet keeps its original key, so caches written before the option existed
  // stay valid; the full alphabet adds a term.
  const std::string tok_key = sha256_hex(fmt::format(
      "{}|{}|{}|{}|{}{}", kAlgorithmVersion, key_material, opt.vocab_size, opt.min_frequency,
      fmt::join(kSpecials, ","), opt.full_byte_alphabet ? "|full-byte-alphabet" : ""));
  bool loaded = false;
  if (!opt.cache_dir.empty()) {
    c.tokenizer_cache_path = fmt::format("{}/tokenizers/{}-{}-{}.json", opt.cache_dir, name,
                                         opt.vocab_size, tok_key.substr(0, 16));
    if (file_exists(c.tokenizer_cache_path)) {
      try {
        c.tokenizer_json = read_file(c.tokenizer_cache_path);
        c.tokenizer = BpeTokenizer::from_json(c.tokenizer_json, c.tokenizer_cache_path);
        loaded = true;
      } catch (const std::exception&) {
        loaded = false;  // a damaged cache entry is rebuilt, never trusted
      }
    }
  }
  if (!loaded) {
    c.tokenizer =
        train_bpe(texts, opt.vocab_size, opt.min_frequency, kSpecials, opt.full_byte_alphabet);
    c.tokenizer_json = c.tokenizer.to_json();
    if (!c.tokenizer_cache_path.empty())
      store_in_cache(opt.cache_dir + "/tokenizers", c.tokenizer_cache_path, c.tokenizer_json);
  }
  c.tokenizer_from_cache = loaded;
  c.tokenizer_sha256 = sha256_hex(c.tokenizer_json);
  c.tokenizer_seconds = seconds_since(t0);
}

bool load_or_encode(const Corpus& c, const CorpusOptions& opt, const std::string& text,
                    const std::string& text_sha256, std::vector<int32_t>& ids) {
  std::string path;
  if (!opt.cache_dir.empty()) {
    std::string key =
        sha256_hex(fmt::format("{}|{}|{}", kAlgorithmVersion, text_sha256, c.tokenizer_sha256));
    path = fmt::format("{}/ids/{}.ids", opt.cache_dir, key.substr(0, 32));
    if (file_exists(path) && deserialize_ids(read_file(path), ids)) return true;
  }
  ids = c.tokenizer.encode(text);
  if (!path.empty()) store_in_cache(opt.cache_dir + "/ids", path, serialize_ids(ids));
  return false;
}

Corpus load_wikitext_corpus(const CorpusOptions& opt) {
  Corpus c;
  const char* kFiles[] = {"wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt",
                          "tiny_shakespeare.txt"};
  std::vector<std::string> texts;
  for (const char* f : kFiles) {
    texts.push_back(load_dataset_file(opt.data_dir, f));  // verifies size and sha256
    c.dataset_sha256[f] = dataset_sha256(f);
  }
  // ---- tokenizer: trained on (train, shakespeare) as two sequences, or loaded from the cache ----
  load_or_train_tokenizer(
      c, opt, "wikitext-narrative-bpe",
      fmt::format("{}|{}", c.dataset_sha256[kFiles[0]], c.dataset_sha256[kFiles[3]]),
      {texts[0], texts[3]});

  // ---- encoded splits, cached by (text sha256, tokenizer sha256) ----
  auto t1 = Clock::now();
  std::vector<std::vector<int32_t>*> outputs{&c.train, &c.validation, &c.test, &c.narrative};
  bool all_cached = true;
  for (size_t i = 0; i < 4; ++i)
    all_cached =
        load_or_encode(c, opt, texts[i], c.dataset_sha256[kFiles[i]], *outputs[i]) && all_cached;
  c.ids_from_cache = all_cached;
  c.encode_seconds = seconds_since(t1);
  c.train_total = static_cast<int64_t>(c.train.size());
  c.validation_total = static_cast<int64_t>(c.validation.size());
  c.test_total = static_cast<int64_t>(c.test.size());
  c.narrative_total = static_cast<int64_t>(c.narrative.size());
  truncate(c.train, opt.train_limit);
  truncate(c.validation, opt.eval_limit);
  truncate(c.test, opt.eval_limit);
  truncate(c.narrative, opt.narrative_limit);
  return c;
}

}  // namespace dg
