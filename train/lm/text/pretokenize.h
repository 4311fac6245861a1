// Byte-level pre-tokenization as in GPT-2 / Hugging Face ByteLevel(use_regex=true): Unicode
// character classes (UTF-8 decoding is train/io/utf8.h, shared with the JSON reader), the GPT-2
// split written as a hand-made matcher, and the GPT-2 byte <-> char table. Does no normalization,
// no prefix space and no regex in general.
//
// The split reproduces Oniguruma's leftmost-alternative, greedy, backtracking evaluation of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with Unicode 14.0 classes (train/lm/text/unicode_tables.cpp, made by
// tools/gen_unicode_tables.py).
//
// Invalid UTF-8: a byte that does not start a well-formed sequence (Unicode Table 3-7: no
// overlongs, no surrogates, nothing above U+10FFFF, no truncated sequences) is one "char" of
// its own and is classified like U+FFFD, i.e. as class `other` (punctuation-like). Nothing
// throws and every byte lands in exactly one piece, so the pieces always concatenate back to
// the input. Hugging Face never sees such input (it reads Python str).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "train/io/utf8.h"  // decode_utf8, is_valid_utf8, append_utf8: used here and by bpe.cpp

namespace dg {

enum class CharClass : uint8_t { letter, number, space, other };

struct UnicodeClassRange {
  char32_t first;
  char32_t last;  // inclusive
  CharClass char_class;
};

// Generated tables (train/lm/text/unicode_tables.cpp): sorted, non-overlapping ranges of the
// letter, number and space classes; unlisted code points are `other`.
std::span<const UnicodeClassRange> unicode_class_ranges();
const char* unicode_tables_version();  // "14.0.0"

// Class of one code point: \p{L} -> letter, \p{N} -> number, Oniguruma \s -> space.
CharClass char_class(char32_t code_point);

// End (exclusive byte offset) of the GPT-2 split piece that starts at byte `start`
// (< text.size()). Pieces are never empty.
size_t gpt2_piece_end(std::string_view text, size_t start);
// The whole GPT-2 split of `text`, as views into it.
std::vector<std::string_view> split_gpt2(std::string_view text);

// The GPT-2 byte <-> char table: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to the code point
// of the same value; the other 68 bytes, in increasing order, map to U+0100, U+0101, ...
const std::array<char32_t, 256>& byte_to_char_table();
// The byte a byte char stands for, or -1 when the code point is not a byte char.
int char_to_byte(char32_t code_point);
// Each byte of `bytes` as its byte char, UTF-8 encoded (the form tokens take in tokenizer.json).
std::string bytes_to_byte_chars(std::string_view bytes);
// Inverse of bytes_to_byte_chars. Throws std::invalid_argument naming `what` when the text
// is not valid UTF-8 or holds a char that is not a byte char.
std::string byte_chars_to_bytes(std::string_view byte_chars, const std::string& what);

}  // namespace dg
