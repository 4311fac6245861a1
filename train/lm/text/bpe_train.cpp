// Training a byte-level BPE: the Hugging Face BpeTrainer algorithm (word counting, heap of pairs
// with lazy count updates, in-word merges with count deltas), as train_bpe's named steps.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <unordered_map>

#include "train/lm/text/bpe.h"
#include "train/lm/text/bpe_internal.h"
#include "train/lm/text/pretokenize.h"

namespace dg {

namespace {

using bpe_internal::pair_key;
using bpe_internal::pair_left;
using bpe_internal::pair_right;
using bpe_internal::ViewMap;

// Byte offsets where `text` can be cut without changing the GPT-2 split: right after a '\n'
// when an ASCII non-space follows, or a single space and then an ASCII non-space. (A match
// holding the '\n' is all whitespace and ends there; nothing in the pattern looks behind.)
std::vector<size_t> chunk_bounds(std::string_view text, size_t chunks) {
  const auto solid = [&](size_t p) { return p < text.size() && text[p] > 0x20 && text[p] < 0x7F; };
  std::vector<size_t> bounds{0};
  for (size_t k = 1; k < chunks; ++k) {
    size_t p = std::max(bounds.back() + 1, text.size() * k / chunks);
    for (; p < text.size(); ++p) {
      if (text[p - 1] == '\n' && (solid(p) || (text[p] == ' ' && solid(p + 1)))) break;
    }
    if (p >= text.size()) break;
    bounds.push_back(p);
  }
  bounds.push_back(text.size());
  return bounds;
}

struct WordCount {
  std::string_view bytes;  // raw bytes of the word (a view into the training text)
  int64_t count;
};

// Steps 1-2: split every text and count the distinct pieces. Chunks are counted in parallel
// (OpenMP) and summed, so the result does not depend on the thread count. Sorted by bytes.
std::vector<WordCount> count_words(const std::vector<std::string_view>& texts) {
  constexpr size_t kChunkBytes = 1 << 20;
  std::vector<std::string_view> chunks;
  for (const std::string_view text : texts) {
    const std::vector<size_t> bounds = chunk_bounds(text, text.size() / kChunkBytes + 1);
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      chunks.push_back(text.substr(bounds[i], bounds[i + 1] - bounds[i]));
    }
  }
  const int workers = std::max(1, std::min(omp_get_max_threads(), static_cast<int>(chunks.size())));
  std::vector<ViewMap<int64_t>> partial(static_cast<size_t>(workers));
#pragma omp parallel for num_threads(workers) schedule(dynamic, 1)
  for (size_t c = 0; c < chunks.size(); ++c) {
    ViewMap<int64_t>& counts = partial[static_cast<size_t>(omp_get_thread_num())];
    const std::string_view chunk = chunks[c];
    bool inserted;
    for (size_t start = 0; start < chunk.size();) {
      const size_t end = gpt2_piece_end(chunk, start);
      ++counts.get(chunk.substr(start, end - start), inserted);
      start = end;
    }
  }
  for (size_t w = 1; w < partial.size(); ++w) {
    partial[w].for_each([&](std::string_view key, int64_t count) {
      bool inserted;
      partial[0].get(key, inserted) += count;
    });
  }
  std::vector<WordCount> words;
  words.reserve(partial[0].size());
  partial[0].for_each([&](std::string_view key, int64_t count) { words.push_back({key, count}); });
  std::sort(words.begin(), words.end(),
            [](const WordCount& a, const WordCount& b) { return a.bytes < b.bytes; });
  return words;
}

// A heap entry of the trainer: a pair, its count when pushed, and the words to merge it in.
struct PairEntry {
  int64_t count;
  uint64_t pair;
  std::vector<int32_t> words;
};
// Max-heap order: higher count first; on equal counts the smaller (left, right) first.
bool entry_less(const PairEntry& a, const PairEntry& b) {
  if (a.count != b.count) return a.count < b.count;
  return a.pair > b.pair;
}

// Pairs that gained occurrences during one merge step, with the words they appeared in.
using NewPairs = std::unordered_map<uint64_t, std::vector<int32_t>>;

// Replaces left-to-right, non-overlapping (left, right) in `symbols` by `merged` and applies the
// count deltas (times `weight`) to `pair_counts`; pairs created here are recorded in `created`.
void merge_in_word(std::vector<int32_t>& symbols, int32_t left, int32_t right, int32_t merged,
                   int32_t word, int64_t weight, std::unordered_map<uint64_t, int64_t>& pair_counts,
                   NewPairs& created) {
  const auto change = [&](int32_t a, int32_t b, int delta) {
    const uint64_t key = pair_key(a, b);
    pair_counts[key] += delta * weight;
    if (delta > 0) {
      std::vector<int32_t>& where = created[key];
      if (where.empty() || where.back() != word) where.push_back(word);
    }
  };
  const size_t n = symbols.size();
  size_t write = 0;
  for (size_t read = 0; read < n;) {
    if (read + 1 < n && symbols[read] == left && symbols[read + 1] == right) {
      if (write > 0) {  // the previous symbol is the already-rewritten one
        change(symbols[write - 1], left, -1);
        change(symbols[write - 1], merged, +1);
      }
      if (read + 2 < n) {
        change(right, symbols[read + 2], -1);
        change(merged, symbols[read + 2], +1);
      }
      symbols[write++] = merged;
      read += 2;
    } else {
      symbols[write++] = symbols[read++];
    }
  }
  symbols.resize(write);
}
// A merge as training learns it: (left, right) becomes result (ids).
struct LearnedMerge {
  int32_t left, right, result;
};

// The vocabulary as training builds it: the tokens by id, and the id of each token. Specials come
// first (ids 0..), then the learned tokens (the alphabet, then the merges).
struct Vocabulary {
  explicit Vocabulary(std::vector<std::string>& tokens) : tokens(tokens) {}
  std::vector<std::string>& tokens;
  std::unordered_map<std::string, int32_t> ids;
  size_t special_count = 0;

  int32_t add(std::string token) {
    const auto [it, inserted] = ids.emplace(token, static_cast<int32_t>(tokens.size()));
    if (inserted) tokens.push_back(std::move(token));
    return it->second;
  }
  // A special whose text is also a token this training learns from the bytes (a byte char such
  // as 'Ā' for byte 0, or a merge such as 'Ġa' for " a") would share that token's id, and the id
  // decodes to the special's text, not to the bytes: those bytes could not round-trip. Refused,
  // naming the special (Hugging Face's trainer shares the id silently). A special that reads as
  // its own bytes ('ab', '<|endoftext|>') may share an id harmlessly.
  int32_t add_learned(std::string token) {
    const auto it = ids.find(token);
    if (it != ids.end() && static_cast<size_t>(it->second) < special_count) {
      const std::string bytes = byte_chars_to_bytes(token, "token");
      if (bytes != token) {
        std::string hex;
        for (const char b : bytes) hex += fmt::format("{}{:02x}", hex.empty() ? "" : " ", b & 0xff);
        throw std::invalid_argument(fmt::format(
            "train_bpe: special token '{}' is also the byte-level token of the bytes {} in the "
            "training text, so those bytes could not be decoded; choose another special",
            token, hex));
      }
    }
    return add(std::move(token));
  }
};

void check_train_arguments(int vocab_size, int min_frequency) {
  if (vocab_size < 0) {
    throw std::invalid_argument(
        fmt::format("train_bpe: vocab_size must be >= 0, got {}", vocab_size));
  }
  if (min_frequency < 0) {
    throw std::invalid_argument(
        fmt::format("train_bpe: min_frequency must be >= 0, got {}", min_frequency));
  }
}

// Step 3: special tokens first, in list order.
void add_specials(Vocabulary& vocab, const std::vector<std::string>& specials) {
  for (const std::string& special : specials) {
    if (special.empty()) throw std::invalid_argument("train_bpe: a special token is empty");
    if (!is_valid_utf8(special)) {
      throw std::invalid_argument(
          fmt::format("train_bpe: special token '{}' is not UTF-8", special));
    }
    if (vocab.ids.count(special)) {
      throw std::invalid_argument(
          fmt::format("train_bpe: special token '{}' is listed twice", special));
    }
    vocab.add(special);
  }
  vocab.special_count = vocab.tokens.size();
}

// Step 4: the alphabet: byte chars present (or all 256 with full_byte_alphabet), sorted by code
// point. Returns each byte's id.
std::array<int32_t, 256> add_alphabet(Vocabulary& vocab, const std::vector<WordCount>& words,
                                      bool full_byte_alphabet) {
  std::array<bool, 256> present{};
  if (full_byte_alphabet) present.fill(true);
  for (const WordCount& word : words) {
    for (const char b : word.bytes) present[static_cast<unsigned char>(b)] = true;
  }
  std::vector<std::pair<char32_t, int>> alphabet;  // (byte char, byte)
  for (int b = 0; b < 256; ++b) {
    if (present[b]) alphabet.emplace_back(byte_to_char_table()[b], b);
  }
  std::sort(alphabet.begin(), alphabet.end());
  std::array<int32_t, 256> byte_id{};
  for (const auto& [byte_char, byte] : alphabet) {
    std::string token;
    append_utf8(token, byte_char);
    byte_id[byte] = vocab.add_learned(std::move(token));
  }
  return byte_id;
}

// Steps 5-6: the words as symbol ids, the count of every adjacent pair, and the heap of pairs
// (counts updated lazily: an entry is re-queued when its count has changed).
struct PairMerger {
  const std::vector<WordCount>& words;
  std::vector<std::vector<int32_t>> symbols;
  std::unordered_map<uint64_t, int64_t> pair_counts;
  NewPairs where;
  std::vector<PairEntry> heap;

  PairMerger(const std::vector<WordCount>& words, const std::array<int32_t, 256>& byte_id)
      : words(words), symbols(words.size()) {
    for (size_t w = 0; w < words.size(); ++w) {
      std::vector<int32_t>& word = symbols[w];
      word.reserve(words[w].bytes.size());
      for (const char b : words[w].bytes) word.push_back(byte_id[static_cast<unsigned char>(b)]);
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        const uint64_t key = pair_key(word[i], word[i + 1]);
        pair_counts[key] += words[w].count;
        std::vector<int32_t>& list = where[key];
        if (list.empty() || list.back() != static_cast<int32_t>(w))
          list.push_back(static_cast<int32_t>(w));
      }
    }
    push_created();
  }

  // Queues the pairs recorded in `where` (those that gained occurrences) with their counts.
  void push_created() {
    for (auto& [key, list] : where) {
      const int64_t count = pair_counts[key];
      if (count <= 0) continue;
      heap.push_back(PairEntry{count, key, std::move(list)});
      std::push_heap(heap.begin(), heap.end(), entry_less);
    }
    where.clear();
  }

  // The merge loop: the most frequent pair (smallest on ties) becomes a token, until the
  // vocabulary is full or no pair occurs min_frequency times. Returns the merges in order.
  std::vector<LearnedMerge> merge(Vocabulary& vocab, int vocab_size, int min_frequency) {
    std::vector<LearnedMerge> merges;
    while (vocab.tokens.size() < static_cast<size_t>(vocab_size) && !heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), entry_less);
      PairEntry top = std::move(heap.back());
      heap.pop_back();
      const int64_t current = pair_counts[top.pair];
      if (top.count != current) {  // stale: re-queue with the current count
        top.count = current;
        heap.push_back(std::move(top));
        std::push_heap(heap.begin(), heap.end(), entry_less);
        continue;
      }
      if (top.count < 1 || top.count < min_frequency) break;
      const int32_t left = pair_left(top.pair), right = pair_right(top.pair);
      const int32_t merged = vocab.add_learned(vocab.tokens[left] + vocab.tokens[right]);
      merges.push_back({left, right, merged});
      for (const int32_t w : top.words) {
        merge_in_word(symbols[w], left, right, merged, w, words[w].count, pair_counts, where);
      }
      push_created();
    }
    return merges;
  }
};

// A pair merged twice (only when a merge re-creates an existing token) keeps its last rank,
// as in Hugging Face's merge map.
std::vector<LearnedMerge> last_ranks(const std::vector<LearnedMerge>& merges) {
  std::unordered_map<uint64_t, size_t> last_rank;
  for (size_t r = 0; r < merges.size(); ++r)
    last_rank[pair_key(merges[r].left, merges[r].right)] = r;
  std::vector<LearnedMerge> kept;
  for (size_t r = 0; r < merges.size(); ++r) {
    if (last_rank[pair_key(merges[r].left, merges[r].right)] == r) kept.push_back(merges[r]);
  }
  return kept;
}

}  // namespace

BpeTokenizer train_bpe(const std::vector<std::string_view>& texts, int vocab_size,
                       int min_frequency, const std::vector<std::string>& specials,
                       bool full_byte_alphabet) {
  check_train_arguments(vocab_size, min_frequency);
  BpeTokenizer tokenizer;
  Vocabulary vocab(tokenizer.tokens_);
  add_specials(vocab, specials);
  const std::vector<WordCount> words = count_words(texts);  // steps 1-2
  const std::array<int32_t, 256> byte_id = add_alphabet(vocab, words, full_byte_alphabet);
  PairMerger merger(words, byte_id);
  for (const LearnedMerge& m : last_ranks(merger.merge(vocab, vocab_size, min_frequency)))
    tokenizer.merges_.push_back({m.left, m.right, m.result});
  // 7. Specials become special added tokens (they keep their ids 0..).
  for (const std::string& special : specials) {
    tokenizer.added_.push_back({vocab.ids.at(special), special, true, false});
  }
  tokenizer.model_size_ = static_cast<int32_t>(vocab.tokens.size());
  tokenizer.finish("train_bpe");
  return tokenizer;
}

}  // namespace dg
