// Byte-level BPE encoding and decoding: the lookup tables a tokenizer is made of (finish), and
// encoding with Hugging Face's merge_all priority queue. Training is in bpe_train.cpp, the
// tokenizer.json files in bpe_json.cpp.
#include "train/lm/text/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>

#include "train/lm/text/bpe_internal.h"
#include "train/lm/text/pretokenize.h"

namespace dg {

using bpe_internal::pair_key;
using bpe_internal::ViewMap;

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

}  // namespace dg
