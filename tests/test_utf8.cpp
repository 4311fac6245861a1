// train/io/utf8.h, the one UTF-8 decoder: boundary code points, every kind of ill-formed sequence,
// round trips over all scalar values, and the JSON reader and the tokenizer agreeing with it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "train/io/json.h"
#include "train/io/utf8.h"
#include "train/lm/text/pretokenize.h"

using dg::append_utf8;
using dg::decode_utf8;
using dg::is_valid_utf8;

TEST_CASE("utf8: boundary code points decode, and encode back to the same bytes") {
  struct Case {
    std::string bytes;
    char32_t code_point;
  };
  const std::vector<Case> cases = {{"\x00", 0x0},
                                   {"\x7f", 0x7F},
                                   {"\xc2\x80", 0x80},
                                   {"\xdf\xbf", 0x7FF},
                                   {"\xe0\xa0\x80", 0x800},
                                   {"\xed\x9f\xbf", 0xD7FF},
                                   {"\xee\x80\x80", 0xE000},
                                   {"\xef\xbf\xbf", 0xFFFF},
                                   {"\xf0\x90\x80\x80", 0x10000},
                                   {"\xf4\x8f\xbf\xbf", 0x10FFFF}};
  for (const Case& c : cases) {
    const std::string bytes = c.bytes.empty() ? std::string(1, '\0') : c.bytes;
    CAPTURE(static_cast<uint32_t>(c.code_point));
    const dg::Utf8Char d = decode_utf8(bytes, 0);
    CHECK(d.valid);
    CHECK(d.code_point == c.code_point);
    CHECK(d.length == static_cast<int>(bytes.size()));
    CHECK(is_valid_utf8(bytes));
    std::string encoded;
    append_utf8(encoded, c.code_point);
    CHECK(encoded == bytes);
  }
  // In the middle of a string.
  const std::string text = "a\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80z";
  CHECK(decode_utf8(text, 1).code_point == 0xE9);
  CHECK(decode_utf8(text, 3).code_point == 0x65E5);
  CHECK(decode_utf8(text, 6).code_point == 0x1F600);
  CHECK(decode_utf8(text, 10).code_point == U'z');
  CHECK(is_valid_utf8(text));
}

TEST_CASE("utf8: ill-formed sequences are one invalid char of one byte, never an exception") {
  const std::vector<std::string> bad = {"\x80",
                                        "\xbf",  // lone continuation bytes
                                        "\xc0\x80",
                                        "\xc1\xbf",  // overlong 2-byte leads
                                        "\xe0\x80\x80",
                                        "\xe0\x9f\xbf",  // overlong 3-byte
                                        "\xf0\x80\x80\x80",
                                        "\xf0\x8f\xbf\xbf",  // overlong 4-byte
                                        "\xed\xa0\x80",
                                        "\xed\xbf\xbf",  // surrogates
                                        "\xf4\x90\x80\x80",
                                        "\xf5\x80\x80\x80",
                                        "\xff",
                                        "\xfe",  // above U+10FFFF, never bytes
                                        "\xc3",
                                        "\xe6\x97",
                                        "\xf0\x9f\x98",  // truncated
                                        "\xc3\x41",
                                        "\xe6\x41\x80",
                                        "\xf0\x9f\x41\x80"};  // a non-continuation inside
  for (const std::string& b : bad) {
    CAPTURE(b);
    const dg::Utf8Char d = decode_utf8(b, 0);
    CHECK_FALSE(d.valid);
    CHECK(d.length == 1);
    CHECK(d.code_point == 0xFFFD);
    CHECK_FALSE(is_valid_utf8(b));
    CHECK_FALSE(is_valid_utf8("ok " + b + " ok"));
    // The JSON reader refuses the same strings, the writer too.
    CHECK_THROWS_WITH_AS(dg::json::parse("\"" + b + "\"", "bad.json"),
                         doctest::Contains("invalid UTF-8"), std::runtime_error);
    CHECK_THROWS_WITH_AS(dg::json::dump(dg::json::Value(b)), doctest::Contains("invalid UTF-8"),
                         std::runtime_error);
    // The tokenizer's split keeps every byte.
    // (The text is named: split_gpt2 returns views into it, and a temporary in a range-for's
    // initializer dies before the loop body runs, which ASan caught.)
    const std::string text = "x" + b + " y";
    std::string joined;
    for (std::string_view piece : dg::split_gpt2(text)) joined += piece;
    CHECK(joined == text);
  }
}

TEST_CASE("utf8: every scalar value round trips; exactly those encodings are well-formed") {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string bytes;
    append_utf8(bytes, cp);
    const dg::Utf8Char d = decode_utf8(bytes, 0);
    if (!d.valid || d.code_point != cp || d.length != static_cast<int>(bytes.size())) {
      FAIL("U+" << std::hex << static_cast<uint32_t>(cp) << " does not round trip");
    }
  }
  // All two- and three-byte strings: the well-formed ones are exactly the encodings of
  // U+0080..U+07FF (1920) and of U+0800..U+FFFF without the 2048 surrogates (61440).
  int two = 0, three = 0;
  std::string s2(2, '\0'), s3(3, '\0');
  for (int a = 0x80; a < 0x100; ++a) {
    for (int b = 0; b < 0x100; ++b) {
      s2[0] = static_cast<char>(a);
      s2[1] = static_cast<char>(b);
      const dg::Utf8Char d = decode_utf8(s2, 0);
      if (d.valid && d.length == 2) ++two;
      for (int c = 0; c < 0x100; ++c) {
        s3[0] = static_cast<char>(a);
        s3[1] = static_cast<char>(b);
        s3[2] = static_cast<char>(c);
        const dg::Utf8Char e = decode_utf8(s3, 0);
        if (e.valid && e.length == 3) {
          ++three;
          std::string again;
          append_utf8(again, e.code_point);
          if (again != s3) FAIL("a 3-byte sequence decodes to a different encoding");
        }
      }
    }
  }
  CHECK(two == 1920);
  CHECK(three == 61440);
}
