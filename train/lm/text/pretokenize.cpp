// The GPT-2 split as a direct matcher (no regex engine), character classes and the byte <-> char
// table (UTF-8 decoding is train/io/utf8.h's). Does not normalize text or add a prefix space.
#include "train/lm/text/pretokenize.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace dg {

namespace {

// Classes of the 128 ASCII code points, so that plain text never reaches the range search.
constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      classes[c] = CharClass::letter;
    } else if (c >= '0' && c <= '9') {
      classes[c] = CharClass::number;
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) {
      classes[c] = CharClass::space;
    } else {
      classes[c] = CharClass::other;
    }
  }
  return classes;
}
constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

// One character of the input as the matcher sees it: its class and byte length.
struct Scanned {
  CharClass char_class;
  int length;
};

Scanned scan(std::string_view text, size_t pos) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) return {kAsciiClasses[byte], 1};
  const Utf8Char c = decode_utf8(text, pos);
  return {c.valid ? char_class(c.code_point) : CharClass::other, c.length};
}

// End of the run of characters of class `wanted` starting at `pos`.
size_t run_end(std::string_view text, size_t pos, CharClass wanted) {
  while (pos < text.size()) {
    const Scanned c = scan(text, pos);
    if (c.char_class != wanted) break;
    pos += static_cast<size_t>(c.length);
  }
  return pos;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd) at `pos`, or 0. Case-sensitive, as in GPT-2.
size_t contraction_length(std::string_view text, size_t pos) {
  const std::string_view rest = text.substr(pos);
  if (rest.size() < 2 || rest[0] != '\'') return 0;
  const char a = rest[1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (rest.size() >= 3) {
    const char b = rest[2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

std::array<int16_t, 0x144> make_char_to_byte() {
  std::array<int16_t, 0x144> inverse{};
  inverse.fill(-1);
  const auto& table = byte_to_char_table();
  for (int b = 0; b < 256; ++b) inverse[table[b]] = static_cast<int16_t>(b);
  return inverse;
}

}  // namespace

CharClass char_class(char32_t code_point) {
  if (code_point < 128) return kAsciiClasses[code_point];
  const auto ranges = unicode_class_ranges();
  // First range whose last >= code_point.
  const auto it = std::partition_point(ranges.begin(), ranges.end(),
                                       [&](const auto& range) { return range.last < code_point; });
  if (it != ranges.end() && it->first <= code_point) return it->char_class;
  return CharClass::other;
}

// The alternatives are tried in the pattern's order at `start`; the first that matches wins.
// ` ?X+` (X = \p{L}, \p{N}, or [^\s\p{L}\p{N}]) takes the literal space when X follows it,
// otherwise needs X at `start`. `\s+(?!\S)` takes the whitespace run, giving back its last
// char when a non-space follows (it fails for a run of one); `\s+` then takes that one char.
size_t gpt2_piece_end(std::string_view text, size_t start) {
  if (const size_t n = contraction_length(text, start)) return start + n;
  const Scanned first = scan(text, start);
  if (text[start] == ' ' && start + 1 < text.size()) {
    const Scanned next = scan(text, start + 1);
    if (next.char_class != CharClass::space) {
      return run_end(text, start + 1, next.char_class);
    }
  }
  if (first.char_class != CharClass::space) {
    return run_end(text, start, first.char_class);
  }
  // Whitespace: \s+(?!\S), else \s+.
  const size_t end = run_end(text, start, CharClass::space);
  if (end == text.size()) return end;
  // Backtrack by one char: find the start of the run's last character.
  size_t last = start;
  for (size_t pos = start; pos < end;) {
    last = pos;
    pos += static_cast<size_t>(scan(text, pos).length);
  }
  return last > start ? last : end;
}

std::vector<std::string_view> split_gpt2(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t end = gpt2_piece_end(text, start);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

const std::array<char32_t, 256>& byte_to_char_table() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? static_cast<char32_t>(b) : next_extra++;
    }
    return t;
  }();
  return table;
}

int char_to_byte(char32_t code_point) {
  static const std::array<int16_t, 0x144> inverse = make_char_to_byte();
  return code_point < inverse.size() ? inverse[code_point] : -1;
}

std::string bytes_to_byte_chars(std::string_view bytes) {
  const auto& table = byte_to_char_table();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) append_utf8(out, table[static_cast<unsigned char>(b)]);
  return out;
}

std::string byte_chars_to_bytes(std::string_view byte_chars, const std::string& what) {
  std::string out;
  out.reserve(byte_chars.size());
  for (size_t pos = 0; pos < byte_chars.size();) {
    const Utf8Char c = decode_utf8(byte_chars, pos);
    const int byte = c.valid ? char_to_byte(c.code_point) : -1;
    if (byte < 0) {
      throw std::invalid_argument(
          c.valid ? fmt::format("{}: U+{:04X} at byte {} is not a GPT-2 byte char", what,
                                static_cast<uint32_t>(c.code_point), pos)
                  : fmt::format("{}: invalid UTF-8 at byte {}", what, pos));
    }
    out.push_back(static_cast<char>(byte));
    pos += static_cast<size_t>(c.length);
  }
  return out;
}

}  // namespace dg
