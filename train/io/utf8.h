// UTF-8, the one decoder and encoder of the tree: the JSON reader/writer (train/io/json.cpp) and
// the tokenizer's pre-tokenizer (train/lm/text/) both use it. Well-formed means Unicode Table 3-7:
// no overlong forms, no surrogates, nothing above U+10FFFF, no truncated sequences. Header-only
// so the tokenizer's inner loop can inline it; it does no normalization and no U+FFFD output.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace dg {

// One decoded character of a UTF-8 string.
struct Utf8Char {
  char32_t code_point;  // U+FFFD when !valid
  int length;           // bytes consumed, 1..4 (1 when !valid)
  bool valid;
};

// Decodes the character starting at byte `pos` (< text.size()). Never throws: a byte that does
// not start a well-formed sequence is one invalid char of length 1.
inline Utf8Char decode_utf8(std::string_view text, size_t pos) {
  const auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = at(pos);
  const Utf8Char invalid{0xFFFD, 1, false};
  if (b0 < 0x80) return {b0, 1, true};
  int length;
  char32_t code_point;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte (Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    code_point = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    code_point = b0 & 0x0F;
    if (b0 == 0xE0) low = 0xA0;   // no overlongs
    if (b0 == 0xED) high = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    code_point = b0 & 0x07;
    if (b0 == 0xF0) low = 0x90;   // no overlongs
    if (b0 == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return invalid;  // continuation byte, C0, C1 or F5..FF as a first byte
  }
  if (pos + static_cast<size_t>(length) > text.size()) return invalid;
  for (int k = 1; k < length; ++k) {
    const unsigned char b = at(pos + static_cast<size_t>(k));
    const unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
    if (b < lo || b > hi) return invalid;
    code_point = (code_point << 6) | (b & 0x3F);
  }
  return {code_point, length, true};
}

// True when the whole string is well-formed UTF-8.
inline bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (!c.valid) return false;
    pos += static_cast<size_t>(c.length);
  }
  return true;
}

// Appends the UTF-8 encoding of a scalar value (not a surrogate, <= U+10FFFF).
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace dg
