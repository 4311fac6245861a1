// Byte-level BPE that gives the same merges, ids and tokenizer.json as Hugging Face tokenizers
// (BpeTrainer + ByteLevel pre-tokenizer, tools/attnres/PROTOCOL.md §1.2), and reads their files.
// Deliberately missing: normalizers, dropout, byte fallback, subword prefixes/suffixes,
// add_prefix_space, offsets, truncation/padding and post-processors (tokenizer.json files that
// use any of them are rejected by name, not silently misread).
//
// Differences from Hugging Face that are deliberate and documented:
//  * encode() accepts any bytes. Invalid UTF-8 bytes are single "other" chars for the split
//    (train/lm/text/pretokenize.h) and are encoded through their byte chars like any byte.
//  * decode() returns raw bytes (no U+FFFD replacement), and added tokens decode to their text.
//    So decode(encode(s)) == s whenever every byte of s is in the vocabulary (always, for a
//    tokenizer trained with full_byte_alphabet); a byte that is not becomes <unk> (id of
//    "<unk>") and decodes as the five characters "<unk>".
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dg {

class BpeTokenizer {
 public:
  // An added token (tokenizer.json "added_tokens"): cut out of the raw text before the split.
  struct AddedToken {
    int32_t id;
    std::string content;
    bool special;
    bool normalized = false;  // kept for tokenizer.json; there is no normalizer either way
  };

  // Number of ids (model vocabulary plus added tokens beyond it).
  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  // The token of an id as written in tokenizer.json (byte chars: " the" is "Ġthe").
  // Throws std::out_of_range naming the id when it is not in [0, vocab_size()).
  const std::string& token(int id) const;
  // The id of a token string (tokenizer.json form), or -1.
  int32_t token_id(std::string_view token) const;
  // Merges in rank order, as written in tokenizer.json.
  std::vector<std::pair<std::string, std::string>> merges() const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // Ids of `text` (no BOS/EOS added). Added tokens are cut out first (leftmost, then longest);
  // the rest is split GPT-2 style, byte-mapped and merged lowest rank first (leftmost on ties).
  // A byte whose char is not in the vocabulary gives the id of "<unk>" (one per byte); throws
  // std::runtime_error when that happens and the vocabulary has no "<unk>".
  std::vector<int32_t> encode(std::string_view text) const;
  // Bytes of the ids; added tokens give their literal text. Throws std::out_of_range on a bad id.
  std::string decode(const std::vector<int32_t>& ids) const;

  // Hugging Face tokenizer.json (version "1.0", pretty-printed, merges as [left, right] pairs).
  std::string to_json() const;
  // Reads a tokenizer.json. Throws std::runtime_error naming `source_name` and the field on
  // anything malformed or unsupported. Merges may be ["a", "b"] pairs or legacy "a b" strings.
  static BpeTokenizer from_json(std::string_view text, const std::string& source_name);
  void save(const std::string& path) const;
  static BpeTokenizer load(const std::string& path);

 private:
  struct MergeRule {
    int32_t left, right, result;
  };
  friend BpeTokenizer train_bpe(const std::vector<std::string_view>& texts, int vocab_size,
                                int min_frequency, const std::vector<std::string>& specials,
                                bool full_byte_alphabet);

  // Fills the lookup tables from tokens_, merges_ and added_. `source` names errors.
  void finish(const std::string& source);
  // Appends the ids of one pre-tokenized piece (raw bytes).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;   // by id
  std::vector<std::string> decoded_;  // bytes each id decodes to
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<MergeRule> merges_;                                            // by rank
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_of_pair_;  // -> (rank, result)
  std::vector<AddedToken> added_;
  int32_t model_size_ = 0;           // ids below this are model vocabulary
  std::string unk_token_ = "<unk>";  // model.unk_token
  int32_t unk_id_ = -1;
  std::array<int32_t, 256> byte_ids_{};  // id of each byte's char, or -1
};

// Trains a byte-level BPE exactly as Hugging Face's BpeTrainer with a ByteLevel pre-tokenizer
// (add_prefix_space=false): `texts` are the sequences, `specials` take ids 0.. in order and are
// added as special added tokens afterwards; the model's unk token is "<unk>". Throws
// std::invalid_argument on a negative vocab_size/min_frequency or an empty/duplicate special.
// The alphabet (the first tokens after the specials) is by default the byte chars present in
// `texts`, as the reference's tokenizer has it: a byte the texts lack encodes to <unk>. With
// full_byte_alphabet it is all 256 byte chars (Hugging Face's
// initial_alphabet=ByteLevel.alphabet()), so that decode(encode(s)) == s for any bytes s; the
// merges are then learnt within the vocabulary that remains.
BpeTokenizer train_bpe(const std::vector<std::string_view>& texts, int vocab_size,
                       int min_frequency, const std::vector<std::string>& specials,
                       bool full_byte_alphabet = false);

}  // namespace dg
