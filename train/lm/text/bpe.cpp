// Byte-level BPE: the Hugging Face BpeTrainer algorithm (word counting, heap of pairs with lazy
// count updates, in-word merges with count deltas), encoding with the merge_all priority queue,
// and tokenizer.json reading/writing. It does not normalize text or support other BPE options.
#include "train/lm/text/bpe.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/json.h"
#include "train/lm/text/pretokenize.h"

namespace dg {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t pair_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t pair_right(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// Open-addressing hash map keyed by string views that outlive it (pieces of the input text).
template <class V>
class ViewMap {
 public:
  ViewMap() { rehash(1024); }

  // The value stored for `key`, default-constructed and inserted when absent.
  V& get(std::string_view key, bool& inserted) {
    if ((used_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    const size_t hash = std::hash<std::string_view>{}(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (!slot.occupied) {
        slot = Slot{key, hash, V{}, true};
        ++used_;
        inserted = true;
        return slot.value;
      }
      if (slot.hash == hash && slot.key == key) {
        inserted = false;
        return slot.value;
      }
    }
  }

  template <class F>
  void for_each(F&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.occupied) visit(slot.key, slot.value);
    }
  }
  size_t size() const { return used_; }

 private:
  struct Slot {
    std::string_view key;
    size_t hash = 0;
    V value{};
    bool occupied = false;
  };

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    const size_t mask = capacity - 1;
    for (Slot& slot : old) {
      if (!slot.occupied) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].occupied) i = (i + 1) & mask;
      slots_[i] = std::move(slot);
    }
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
};

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

json::Value byte_level_config(bool add_prefix_space) {
  json::Value config;
  config["type"] = "ByteLevel";
  config["add_prefix_space"] = add_prefix_space;
  config["trim_offsets"] = true;
  config["use_regex"] = true;
  return config;
}

}  // namespace

BpeTokenizer train_bpe(const std::vector<std::string_view>& texts, int vocab_size,
                       int min_frequency, const std::vector<std::string>& specials,
                       bool full_byte_alphabet) {
  if (vocab_size < 0) {
    throw std::invalid_argument(
        fmt::format("train_bpe: vocab_size must be >= 0, got {}", vocab_size));
  }
  if (min_frequency < 0) {
    throw std::invalid_argument(
        fmt::format("train_bpe: min_frequency must be >= 0, got {}", min_frequency));
  }
  BpeTokenizer tokenizer;
  std::vector<std::string>& tokens = tokenizer.tokens_;
  std::unordered_map<std::string, int32_t> ids;
  const auto add_token = [&](std::string token) {
    const auto [it, inserted] = ids.emplace(token, static_cast<int32_t>(tokens.size()));
    if (inserted) tokens.push_back(std::move(token));
    return it->second;
  };

  // 3. Special tokens first, in list order.
  for (const std::string& special : specials) {
    if (special.empty()) throw std::invalid_argument("train_bpe: a special token is empty");
    if (!is_valid_utf8(special)) {
      throw std::invalid_argument(
          fmt::format("train_bpe: special token '{}' is not UTF-8", special));
    }
    if (ids.count(special)) {
      throw std::invalid_argument(
          fmt::format("train_bpe: special token '{}' is listed twice", special));
    }
    add_token(special);
  }

  // A special whose text is also a token this training learns from the bytes (a byte char such
  // as 'Ā' for byte 0, or a merge such as 'Ġa' for " a") would share that token's id, and the id
  // decodes to the special's text, not to the bytes: those bytes could not round-trip. Refused,
  // naming the special (Hugging Face's trainer shares the id silently). A special that reads as
  // its own bytes ('ab', '<|endoftext|>') may share an id harmlessly.
  const size_t special_count = tokens.size();
  const auto add_learned_token = [&](std::string token) {
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
    return add_token(std::move(token));
  };

  // 1-2. Words and their counts.
  const std::vector<WordCount> words = count_words(texts);

  // 4. The alphabet: byte chars present (or all 256 with full_byte_alphabet), sorted by code point.
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
    byte_id[byte] = add_learned_token(std::move(token));
  }

  // 5. Words as symbol ids; pair counts and the words each pair occurs in.
  std::vector<std::vector<int32_t>> symbols(words.size());
  std::unordered_map<uint64_t, int64_t> pair_counts;
  NewPairs where;
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
  std::vector<PairEntry> heap;
  const auto push_created = [&](NewPairs& created) {
    for (auto& [key, list] : created) {
      const int64_t count = pair_counts[key];
      if (count <= 0) continue;
      heap.push_back(PairEntry{count, key, std::move(list)});
      std::push_heap(heap.begin(), heap.end(), entry_less);
    }
    created.clear();
  };
  push_created(where);

  // 6. The merge loop.
  std::vector<BpeTokenizer::MergeRule> merges;
  while (tokens.size() < static_cast<size_t>(vocab_size) && !heap.empty()) {
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
    const int32_t merged = add_learned_token(tokens[left] + tokens[right]);
    merges.push_back({left, right, merged});
    for (const int32_t w : top.words) {
      merge_in_word(symbols[w], left, right, merged, w, words[w].count, pair_counts, where);
    }
    push_created(where);
  }

  // A pair merged twice (only when a merge re-creates an existing token) keeps its last rank,
  // as in Hugging Face's merge map.
  std::unordered_map<uint64_t, size_t> last_rank;
  for (size_t r = 0; r < merges.size(); ++r)
    last_rank[pair_key(merges[r].left, merges[r].right)] = r;
  for (size_t r = 0; r < merges.size(); ++r) {
    if (last_rank[pair_key(merges[r].left, merges[r].right)] == r)
      tokenizer.merges_.push_back(merges[r]);
  }

  // 7. Specials become special added tokens (they keep their ids 0..).
  for (const std::string& special : specials) {
    tokenizer.added_.push_back({ids.at(special), special, true, false});
  }
  tokenizer.model_size_ = static_cast<int32_t>(tokens.size());
  tokenizer.finish("train_bpe");
  return tokenizer;
}

void BpeTokenizer::finish(const std::string& source) {
  ids_.clear();
  for (int32_t id = 0; id < model_size_; ++id) {
    if (!ids_.emplace(tokens_[id], id).second) {
      throw std::runtime_error(
          fmt::format("{}: model.vocab: token '{}' appears twice", source, tokens_[id]));
    }
  }
  merge_of_pair_.clear();
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const MergeRule& m = merges_[rank];
    merge_of_pair_[pair_key(m.left, m.right)] = {static_cast<int32_t>(rank), m.result};
  }
  for (int b = 0; b < 256; ++b) {
    std::string token;
    append_utf8(token, byte_to_char_table()[b]);
    const auto it = ids_.find(token);
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
  const auto unk = ids_.find(unk_token_);
  unk_id_ = unk == ids_.end() ? -1 : unk->second;
  decoded_.assign(tokens_.size(), std::string());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    try {
      decoded_[id] = byte_chars_to_bytes(tokens_[id], "token");
    } catch (const std::invalid_argument&) {
      decoded_[id] = tokens_[id];  // not made of byte chars: its own UTF-8, as HF's decoder does
    }
  }
  for (const AddedToken& added : added_) decoded_[added.id] = added.content;
}

const std::string& BpeTokenizer::token(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range(
        fmt::format("BpeTokenizer::token: id {} is outside [0, {})", id, vocab_size()));
  }
  return tokens_[id];
}

int32_t BpeTokenizer::token_id(std::string_view token) const {
  for (const AddedToken& added : added_) {
    if (added.content == token) return added.id;
  }
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::pair<std::string, std::string>> BpeTokenizer::merges() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges_.size());
  for (const MergeRule& m : merges_) out.emplace_back(tokens_[m.left], tokens_[m.right]);
  return out;
}

// Hugging Face Word::merge_all: a min-heap of (rank, position); stale entries are skipped when
// the pair now at that position no longer produces the entry's token.
void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = byte_ids_[static_cast<unsigned char>(piece[i])];
    if (id < 0) {
      if (unk_id_ < 0) {
        throw std::runtime_error(
            fmt::format("BpeTokenizer::encode: byte 0x{:02X} is not in the vocabulary and there is "
                        "no '{}' token",
                        static_cast<unsigned char>(piece[i]), unk_token_));
      }
      id = unk_id_;
    }
    symbols[i] = {id, i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merge_of_pair_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merge_of_pair_.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (!current.alive || current.next < 0) continue;
    const Symbol right = symbols[current.next];
    const auto it = merge_of_pair_.find(pair_key(current.id, right.id));
    if (it == merge_of_pair_.end() || it->second.second != top.result) continue;
    symbols[current.next].alive = false;
    current.id = top.result;
    current.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (current.prev >= 0) consider(current.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  // Cache: piece bytes -> (offset, length) of its ids in `cached`.
  ViewMap<std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> cached;
  const auto encode_segment = [&](std::string_view segment) {
    for (size_t start = 0; start < segment.size();) {
      const size_t end = gpt2_piece_end(segment, start);
      const std::string_view piece = segment.substr(start, end - start);
      bool inserted;
      auto& slot = cache.get(piece, inserted);
      if (inserted) {
        const size_t offset = cached.size();
        encode_piece(piece, cached);
        slot = {static_cast<uint32_t>(offset), static_cast<uint32_t>(cached.size() - offset)};
      }
      ids.insert(ids.end(), cached.begin() + slot.first, cached.begin() + slot.first + slot.second);
      start = end;
    }
  };
  // Added tokens are cut out first: the leftmost occurrence, the longest on ties.
  std::vector<size_t> next_at(added_.size(), 0);
  for (size_t k = 0; k < added_.size(); ++k) next_at[k] = text.find(added_[k].content);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos, best_k = 0;
    for (size_t k = 0; k < added_.size(); ++k) {
      if (next_at[k] != std::string_view::npos && next_at[k] < pos) {
        next_at[k] = text.find(added_[k].content, pos);
      }
      if (next_at[k] < best || (next_at[k] == best && best != std::string_view::npos &&
                                added_[k].content.size() > added_[best_k].content.size())) {
        best = next_at[k];
        best_k = k;
      }
    }
    if (best == std::string_view::npos) {
      encode_segment(text.substr(pos));
      break;
    }
    encode_segment(text.substr(pos, best - pos));
    ids.push_back(added_[best_k].id);
    pos = best + added_[best_k].content.size();
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw std::out_of_range(
          fmt::format("BpeTokenizer::decode: id {} is outside [0, {})", id, vocab_size()));
    }
    out += decoded_[id];
  }
  return out;
}

std::string BpeTokenizer::to_json() const {
  json::Value root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  json::Value added = json::Array{};
  std::vector<AddedToken> sorted = added_;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const AddedToken& token : sorted) {
    json::Value entry;
    entry["id"] = token.id;
    entry["content"] = token.content;
    entry["single_word"] = false;
    entry["lstrip"] = false;
    entry["rstrip"] = false;
    entry["normalized"] = token.normalized;
    entry["special"] = token.special;
    added.push_back(std::move(entry));
  }
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = byte_level_config(false);
  root["post_processor"] = nullptr;
  root["decoder"] = byte_level_config(true);  // what Python's decoders.ByteLevel() writes
  json::Value& model = root["model"];
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = unk_token_.empty() ? json::Value() : json::Value(unk_token_);
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  json::Value& vocab = model["vocab"];
  vocab = json::Object{};
  for (int32_t id = 0; id < model_size_; ++id) vocab[tokens_[id]] = id;
  json::Value merges = json::Array{};
  for (const MergeRule& m : merges_)
    merges.push_back(json::Array{tokens_[m.left], tokens_[m.right]});
  model["merges"] = std::move(merges);
  return json::dump(root, 2);
}

namespace {

// Reads tokenizer.json's fields, every error naming the file and the field.
class TokenizerJsonReader {
 public:
  explicit TokenizerJsonReader(const std::string& source_name) : source_(source_name) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::runtime_error(fmt::format("{}: {}: {}", source_, field, what));
  }
  // Runs `read`, turning the json accessors' kind errors into errors that name the field.
  template <typename Read>
  decltype(auto) field(const std::string& name, const Read& read) const {
    try {
      return read();
    } catch (const std::runtime_error& e) {
      fail(name, e.what());
    }
  }
  void require_null(const json::Value& object, const std::string& prefix, std::string_view key,
                    const std::string& why) const {
    const json::Value* value = object.find(key);
    if (value && !value->is_null()) fail(prefix + std::string(key), "must be null (" + why + ")");
  }
  void require_bool(const json::Value& object, const std::string& prefix, std::string_view key,
                    bool wanted, bool default_value) const {
    const json::Value* value = object.find(key);
    const std::string name = prefix + std::string(key);
    const bool actual = value ? field(name, [&] { return value->as_bool(); }) : default_value;
    if (actual != wanted)
      fail(name, fmt::format("must be {} (other settings are not supported)", wanted));
  }
  void require_byte_level(const json::Value& root, std::string_view key, bool nullable,
                          bool check_prefix) const {
    const json::Value* value = root.find(key);
    const std::string name(key);
    if (!value || value->is_null()) {
      if (!nullable) fail(name, "missing (a ByteLevel pre-tokenizer is required)");
      return;
    }
    if (!value->is_object()) fail(name, "expected an object");
    const json::Value* type = value->find("type");
    if (!type || !type->is_string() || type->as_string() != "ByteLevel") {
      fail(name + ".type", "only \"ByteLevel\" is supported");
    }
    if (check_prefix) {
      require_bool(*value, name + ".", "add_prefix_space", false, true);
      require_bool(*value, name + ".", "use_regex", true, true);
    }
  }

 private:
  const std::string& source_;
};

// Refuses every setting depthgrad's byte-level BPE would not reproduce; returns the model object.
const json::Value& supported_model(const TokenizerJsonReader& in, const json::Value& root) {
  if (!root.is_object()) in.fail("(top level)", "expected an object");
  const json::Value* version = root.find("version");
  if (!version || !version->is_string() || version->as_string() != "1.0")
    in.fail("version", "must be \"1.0\"");
  in.require_null(root, "", "truncation", "truncation is not supported");
  in.require_null(root, "", "padding", "padding is not supported");
  in.require_null(root, "", "normalizer", "normalizers are not supported");
  in.require_byte_level(root, "pre_tokenizer", false, true);
  in.require_byte_level(root, "post_processor", true, false);  // ByteLevel only changes offsets
  in.require_byte_level(root, "decoder", true, false);

  const json::Value* model = root.find("model");
  if (!model || !model->is_object()) in.fail("model", "missing or not an object");
  const json::Value* type = model->find("type");
  if (type && (!type->is_string() || type->as_string() != "BPE"))
    in.fail("model.type", "only \"BPE\" is supported");
  in.require_null(*model, "model.", "dropout", "BPE dropout is not supported");
  // GPT-2's file writes "" for these two, which means none: accepted as null.
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json::Value* value = model->find(key);
    if (!(value && value->is_string() && value->as_string().empty()))
      in.require_null(*model, "model.", key, "not supported");
  }
  in.require_bool(*model, "model.", "fuse_unk", false, false);
  in.require_bool(*model, "model.", "byte_fallback", false, false);
  in.require_bool(*model, "model.", "ignore_merges", false, false);
  return *model;
}

// model.vocab: the tokens by id (ids must be 0..size-1, each once).
std::vector<std::string> read_vocab(const TokenizerJsonReader& in, const json::Value& model) {
  const json::Value* vocab = model.find("vocab");
  if (!vocab) in.fail("model.vocab", "missing");
  const json::Object& entries =
      in.field("model.vocab", [&]() -> const json::Object& { return vocab->as_object(); });
  std::vector<std::string> tokens(entries.size(), std::string());
  std::vector<bool> seen(entries.size(), false);
  for (const auto& entry : entries) {
    // Plain variables, not a structured binding: clang < 16 cannot capture a binding in a lambda.
    const std::string& token = entry.first;
    const json::Value& id_value = entry.second;
    const std::string name = fmt::format("model.vocab[\"{}\"]", token);
    const int64_t id = in.field(name, [&] { return id_value.as_int(); });
    if (id < 0 || id >= static_cast<int64_t>(entries.size())) {
      in.fail(name,
              fmt::format("id {} is outside [0, {}) (ids must be 0..size-1)", id, entries.size()));
    }
    if (seen[id]) in.fail(name, fmt::format("id {} is used twice", id));
    seen[id] = true;
    tokens[id] = token;
  }
  return tokens;
}

// model.merges by rank, as (left, right, merged) ids of `tokens`; each entry is ["left", "right"]
// or the legacy "left right".
std::vector<std::array<int32_t, 3>> read_merges(const TokenizerJsonReader& in,
                                                const json::Value& model,
                                                const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id) ids.emplace(tokens[id], id);
  const json::Value* merges = model.find("merges");
  if (!merges) in.fail("model.merges", "missing");
  const json::Array& merge_list =
      in.field("model.merges", [&]() -> const json::Array& { return merges->as_array(); });
  std::vector<std::array<int32_t, 3>> out;
  for (size_t rank = 0; rank < merge_list.size(); ++rank) {
    const std::string name = fmt::format("model.merges[{}]", rank);
    const json::Value& item = merge_list[rank];
    std::string left, right;
    if (item.is_string()) {  // legacy "left right"
      const std::string& line = item.as_string();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        in.fail(name, fmt::format("'{}' is not two tokens separated by one space", line));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item.at(size_t{0}).is_string() &&
               item.at(size_t{1}).is_string()) {
      left = item.at(size_t{0}).as_string();
      right = item.at(size_t{1}).as_string();
    } else {
      in.fail(name, "expected [\"left\", \"right\"] or \"left right\"");
    }
    const auto find = [&](const std::string& token) {
      const auto it = ids.find(token);
      if (it == ids.end()) in.fail(name, fmt::format("token '{}' is not in model.vocab", token));
      return it->second;
    };
    out.push_back({find(left), find(right), find(left + right)});
  }
  return out;
}

// added_tokens: each either a model token with the same id, or the next id after the last
// (appended to `tokens`); none twice.
std::vector<BpeTokenizer::AddedToken> read_added_tokens(const TokenizerJsonReader& in,
                                                        const json::Value& root,
                                                        std::vector<std::string>& tokens) {
  std::vector<BpeTokenizer::AddedToken> added_tokens;
  const json::Value* added = root.find("added_tokens");
  if (!added || added->is_null()) return added_tokens;
  const json::Array& list =
      in.field("added_tokens", [&]() -> const json::Array& { return added->as_array(); });
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = fmt::format("added_tokens[{}]", i);
    const json::Value& item = list[i];
    if (!item.is_object()) in.fail(name, "expected an object");
    BpeTokenizer::AddedToken token;
    const int64_t id = in.field(name + ".id", [&] { return item.at("id").as_int(); });
    if (id < 0 || id > std::numeric_limits<int32_t>::max())  // once indexed tokens_[-1]
      in.fail(name + ".id", fmt::format("{} is not a valid id", id));
    token.id = static_cast<int32_t>(id);
    token.content = in.field(name + ".content", [&] { return item.at("content").as_string(); });
    const json::Value* special = item.find("special");
    token.special =
        special ? in.field(name + ".special", [&] { return special->as_bool(); }) : false;
    const json::Value* normalized = item.find("normalized");
    token.normalized = normalized
                           ? in.field(name + ".normalized", [&] { return normalized->as_bool(); })
                           : !token.special;
    for (const char* flag : {"single_word", "lstrip", "rstrip"})
      in.require_bool(item, name + ".", flag, false, false);
    if (token.content.empty()) in.fail(name + ".content", "is empty");
    const int32_t size = static_cast<int32_t>(tokens.size());
    if (token.id < size) {
      if (tokens[token.id] != token.content) {
        in.fail(name, fmt::format("id {} is '{}' in model.vocab, not '{}'", token.id,
                                  tokens[token.id], token.content));
      }
    } else if (token.id == size) {
      tokens.push_back(token.content);
    } else {
      in.fail(name + ".id",
              fmt::format("{} leaves a gap after the last id {}", token.id, size - 1));
    }
    for (const BpeTokenizer::AddedToken& other : added_tokens) {
      if (other.content == token.content)
        in.fail(name, fmt::format("'{}' is added twice", token.content));
    }
    added_tokens.push_back(std::move(token));
  }
  return added_tokens;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_json(std::string_view text, const std::string& source_name) {
  const json::Value root = json::parse(text, source_name);
  const TokenizerJsonReader in(source_name);
  const json::Value& model = supported_model(in, root);
  BpeTokenizer tokenizer;
  const json::Value* unk = model.find("unk_token");
  if (unk && !unk->is_null())
    tokenizer.unk_token_ = in.field("model.unk_token", [&] { return unk->as_string(); });
  if (unk && unk->is_null()) tokenizer.unk_token_.clear();
  tokenizer.tokens_ = read_vocab(in, model);
  tokenizer.model_size_ = static_cast<int32_t>(tokenizer.tokens_.size());
  for (const auto& [left, right, result] : read_merges(in, model, tokenizer.tokens_))
    tokenizer.merges_.push_back({left, right, result});
  tokenizer.added_ = read_added_tokens(in, root, tokenizer.tokens_);
  tokenizer.finish(source_name);
  return tokenizer;
}

void BpeTokenizer::save(const std::string& path) const { write_file_atomic(path, to_json()); }

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return from_json(read_file(path), path);
}

}  // namespace dg
