// Byte-level BPE and GPT-2 pre-tokenization against Hugging Face tokenizers.
// Golden values were produced offline with Hugging Face tokenizers 0.23.2 (the official Node
// binding, whose Rust core is the same trainer/encoder as the Python package): splits by its
// ByteLevel pre-tokenizer, merges by its BpeTrainer, ids by Tokenizer.encode on the same
// tokenizer.json. The full-corpus case needs DEPTHGRAD_TEST_DATA (tests/test_data.h: skipped when
// unset).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/temp_dir.h"
#include "tests/test_data.h"
#include "train/io/files.h"
#include "train/lm/text/bpe.h"
#include "train/lm/text/pretokenize.h"

namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;
const std::vector<std::string> kSpecials = {"<pad>", "<unk>", "<bos>", "<eos>"};

// "left right" lines (byte chars never contain a space or a newline) to merge pairs.
Merges parse_merges(std::string_view lines) {
  Merges merges;
  size_t start = 0;
  while (start < lines.size()) {
    size_t end = lines.find('\n', start);
    if (end == std::string_view::npos) end = lines.size();
    const std::string_view line = lines.substr(start, end - start);
    const size_t space = line.find(' ');
    REQUIRE(space != std::string_view::npos);
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
    start = end + 1;
  }
  return merges;
}

std::vector<std::string> split_strings(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string_view piece : dg::split_gpt2(text)) out.emplace_back(piece);
  return out;
}

std::string utf8(char32_t code_point) {
  std::string out;
  dg::append_utf8(out, code_point);
  return out;
}

struct EncodeCase {
  std::string text;
  std::vector<int32_t> ids;
};

void check_encodings(const dg::BpeTokenizer& tokenizer, const std::vector<EncodeCase>& cases) {
  for (const EncodeCase& c : cases) {
    CAPTURE(c.text);
    CHECK(tokenizer.encode(c.text) == c.ids);
  }
}

// The alphabet (ids right after the specials) and every merge's new id, as the trainer assigns
// them.
void check_layout(const dg::BpeTokenizer& tokenizer, const std::vector<std::string>& alphabet,
                  const Merges& merges) {
  for (size_t i = 0; i < kSpecials.size(); ++i)
    CHECK(tokenizer.token(static_cast<int>(i)) == kSpecials[i]);
  for (size_t i = 0; i < alphabet.size(); ++i) {
    CHECK(tokenizer.token(static_cast<int>(kSpecials.size() + i)) == alphabet[i]);
  }
  const size_t first_merged = kSpecials.size() + alphabet.size();
  REQUIRE(tokenizer.vocab_size() == static_cast<int>(first_merged + merges.size()));
  for (size_t r = 0; r < merges.size(); ++r) {
    CHECK(tokenizer.token(static_cast<int>(first_merged + r)) ==
          merges[r].first + merges[r].second);
  }
}

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("GPT-2 split matches Hugging Face's ByteLevel pre-tokenizer") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {" \n \n Senjō", {" \n \n", " Senjō"}},
      {"species of <unk> lobster", {"species", " of", " <", "unk", ">", " lobster"}},
      {"I'm   he's 123abc  \t\n x", {"I", "'m", "  ", " he", "'s", " 123", "abc", "  \t\n", " x"}},
      {"日本 語😀!!", {"日本", " 語", "😀!!"}},
      {"'S 'T 're've'm'll'd'x",
       {"'", "S", " '", "T", " '", "re", "'ve", "'m", "'ll", "'d", "'", "x"}},
      {" 's", {" '", "s"}},
      {"x''s", {"x", "''", "s"}},
      {"a\u00A0b", {"a", "\u00A0", "b"}},
      {"\u3000\u3000x", {"\u3000", "\u3000", "x"}},
      {"end   ", {"end", "   "}},
      {"\n\nx", {"\n", "\n", "x"}},
      {" \n", {" \n"}},
      {"٣٤ ٥x", {"٣٤", " ٥", "x"}},
      {"Ⅻ ½¾ 2½", {"Ⅻ", " ½¾", " 2½"}},
      {"e\u0301te", {"e", "\u0301", "te"}},  // a combining mark (Mn) is not a letter
      {"tab\tx", {"tab", "\t", "x"}},
      {"'", {"'"}},
      {"' s", {"'", " s"}},
      {" !?", {" !?"}},
      {"  !", {" ", " !"}},
      {"a\u200Bb", {"a", "\u200B", "b"}},  // U+200B is not \s
      {"foo\r\nbar", {"foo", "\r", "\n", "bar"}},
      {"x\u0085y", {"x", "\u0085", "y"}},  // U+0085 is \s
      {" \u2028 z", {" \u2028", " z"}},    // U+2028 is \s
      {"'ll've'reX", {"'ll", "'ve", "'re", "X"}},
      {"", {}},
  };
  for (const auto& test_case : cases) {
    const auto& text = test_case.first;  // plain variables: clang < 16 cannot capture bindings
    const auto& pieces = test_case.second;
    CAPTURE(text);
    CHECK(split_strings(text) == pieces);
  }
}

TEST_CASE("Unicode classes follow Oniguruma's \\p{L}, \\p{N} and \\s (Unicode 14.0)") {
  using dg::CharClass;
  CHECK(std::string(dg::unicode_tables_version()) == "14.0.0");
  const std::vector<std::pair<char32_t, CharClass>> cases = {
      {U'a', CharClass::letter},    {U'é', CharClass::letter},    {U'日', CharClass::letter},
      {0x02B0, CharClass::letter},  {0x01C5, CharClass::letter},  // Lm, Lt
      {U'٣', CharClass::number},    {0x216B, CharClass::number},  {U'½', CharClass::number},
      {U' ', CharClass::space},     {0x0B, CharClass::space},     {0x85, CharClass::space},
      {0xA0, CharClass::space},     {0x1680, CharClass::space},   {0x3000, CharClass::space},
      {0x2029, CharClass::space},   {0x180E, CharClass::other},   {0x200B, CharClass::other},
      {0x1C, CharClass::other},     {0x0301, CharClass::other},   {U'!', CharClass::other},
      {0x1F600, CharClass::other},  {0x0378, CharClass::other},   {0xE000, CharClass::other},
      {0x10FFFF, CharClass::other}, {0x20000, CharClass::letter}, {0x1E030, CharClass::other},
  };
  for (const auto& test_case : cases) {
    const auto cp = test_case.first;  // plain variables: clang < 16 cannot capture bindings
    const auto expected = test_case.second;
    CAPTURE(static_cast<uint32_t>(cp));
    CHECK(dg::char_class(cp) == expected);
  }
  // The generated table is sorted, non-overlapping and never lists 'other'.
  const auto ranges = dg::unicode_class_ranges();
  REQUIRE(ranges.size() > 700);
  for (size_t i = 0; i < ranges.size(); ++i) {
    CHECK(ranges[i].first <= ranges[i].last);
    CHECK(ranges[i].char_class != CharClass::other);
    if (i > 0) CHECK(ranges[i - 1].last < ranges[i].first);
  }
}

TEST_CASE("UTF-8 decoding and the split never fail on invalid bytes") {
  CHECK(dg::decode_utf8("\xc3\xa9", 0).code_point == U'é');
  CHECK(dg::decode_utf8("\xf0\x9f\x98\x80", 0).length == 4);
  for (const std::string bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                "\x80", "\xff", "\xe6\x97"}) {
    CAPTURE(bad);
    CHECK_FALSE(dg::is_valid_utf8(bad));
    const dg::Utf8Char c = dg::decode_utf8(bad, 0);
    CHECK_FALSE(c.valid);
    CHECK(c.length == 1);
  }
  CHECK(dg::is_valid_utf8("plain, é, 日本, 😀"));
  // Invalid bytes are "other" chars: they join punctuation runs and never letters.
  CHECK(split_strings("a\xff.b") == std::vector<std::string>{"a", "\xff.", "b"});
  CHECK(split_strings(" \xff\xfe!x") == std::vector<std::string>{" \xff\xfe!", "x"});
  CHECK(split_strings("\xe6\x97 x") == std::vector<std::string>{"\xe6\x97", " x"});
  std::mt19937 rng(123);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(rng() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 8 == 0 ? ' ' : rng() % 256);
    std::string joined;
    for (const std::string_view piece : dg::split_gpt2(bytes)) {
      CHECK_FALSE(piece.empty());
      joined += piece;
    }
    CHECK(joined == bytes);
  }
}

TEST_CASE("GPT-2 byte <-> char table") {
  CHECK(dg::bytes_to_byte_chars(" ") == "Ġ");
  CHECK(dg::bytes_to_byte_chars("\n") == "Ċ");
  CHECK(dg::bytes_to_byte_chars("a!~") == "a!~");
  CHECK(dg::bytes_to_byte_chars("\xc3\xa9") == "Ã©");
  CHECK(dg::byte_to_char_table()[0x00] == 0x100);
  CHECK(dg::byte_to_char_table()[0xAD] == 0x143);  // the last of the 68 remapped bytes
  std::set<char32_t> seen;
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) {
    seen.insert(dg::byte_to_char_table()[b]);
    CHECK(dg::char_to_byte(dg::byte_to_char_table()[b]) == b);
    all_bytes.push_back(static_cast<char>(b));
  }
  CHECK(seen.size() == 256);
  CHECK(dg::byte_chars_to_bytes(dg::bytes_to_byte_chars(all_bytes), "test") == all_bytes);
  CHECK_THROWS_WITH_AS(dg::byte_chars_to_bytes("ab日", "token 'ab日'"),
                       doctest::Contains("token 'ab日': U+65E5"), std::invalid_argument);
}

TEST_CASE("training on \"a a a aa b ab ab\": merges, ids, min_frequency and vocab_size stops") {
  const std::string text = "a a a aa b ab ab";
  const Merges merges = parse_merges("Ġ a\nĠa b\nĠ b\nĠa a");
  const dg::BpeTokenizer full = dg::train_bpe({text}, 1000, 0, kSpecials);
  CHECK(full.merges() == merges);
  check_layout(full, {"a", "b", "Ġ"}, merges);
  check_encodings(full, {{"a a a", {4, 7, 7}}, {"aab ba", {4, 4, 5, 9, 4}}, {"b", {5}}});
  // Pair counts are (Ġ,a)=5, then (Ġa,b)=2, then ties at 1: min_frequency 2 stops there.
  const dg::BpeTokenizer frequent = dg::train_bpe({text}, 1000, 2, kSpecials);
  CHECK(frequent.merges() == Merges(merges.begin(), merges.begin() + 2));
  // 4 specials + 3 chars + 2 merges.
  const dg::BpeTokenizer small = dg::train_bpe({text}, 9, 0, kSpecials);
  CHECK(small.merges() == Merges(merges.begin(), merges.begin() + 2));
  CHECK(small.vocab_size() == 9);
  // A vocabulary smaller than specials + alphabet keeps them all and merges nothing.
  CHECK(dg::train_bpe({text}, 2, 0, kSpecials).vocab_size() == 7);
}

TEST_CASE("training breaks count ties by the smaller (left, right) ids") {
  // (d,c) and (b,a) both occur once; (b,a) = (5,4) sorts before (d,c) = (7,6).
  const dg::BpeTokenizer tokenizer = dg::train_bpe({"dc ba"}, 1000, 0, kSpecials);
  const Merges merges = parse_merges("b a\nd c\nĠ ba");
  CHECK(tokenizer.merges() == merges);
  check_layout(tokenizer, {"a", "b", "c", "d", "Ġ"}, merges);
  check_encodings(tokenizer, {{"dcba ba dc", {10, 9, 11, 8, 10}}});
}

TEST_CASE("overlapping pairs merge left to right (\"aaa\" -> \"aa a\")") {
  const dg::BpeTokenizer tokenizer = dg::train_bpe({"aaaa aaa aa aaaaa"}, 1000, 0, kSpecials);
  const Merges merges = parse_merges("a a\nĠ aa\naa a\naa aa\nĠaa a\nĠaa aaa");
  CHECK(tokenizer.merges() == merges);
  check_layout(tokenizer, {"a", "Ġ"}, merges);
  check_encodings(tokenizer, {{"aaaaaaa", {9, 8}}, {" aaaa", {7, 6}}});
}

TEST_CASE("non-ASCII training text (é, 日本, emoji, Greek, Arabic digits)") {
  const std::string text = "héllo wörld, 日本語 日本 😀😀 naïve café café Ωmega ٣٤٥ 日本";
  const Merges merges = parse_merges(R"(¥ æ
Ã ©
æ Ĺ
Ġ æĹ
ľ ¬
¥æ ľ¬
ĠæĹ ¥æľ¬
a f
c af
ð Ł
Ġ caf
ĺ Ģ
ðŁ ĺĢ
Ġcaf Ã©
a Ã
e g
h Ã©
l d
l l
m eg
n aÃ
r ld
v e
w Ã
£ Ù
¤ Ù
© meg
ª ŀ
¯ ve
¶ rld
Î ©meg
Ù £Ù
è ªŀ
Ġ ðŁĺĢ
Ġ naÃ
Ġ wÃ
Ġ Î©meg
Ġ Ù£Ù
ĠæĹ¥æľ¬ èªŀ
hÃ© ll
¤Ù ¥
ĠðŁĺĢ ðŁĺĢ
ĠnaÃ ¯ve
ĠwÃ ¶rld
ĠÎ©meg a
ĠÙ£Ù ¤Ù¥
hÃ©ll o)");
  const dg::BpeTokenizer tokenizer = dg::train_bpe({text}, 1000, 0, kSpecials);
  CHECK(tokenizer.merges() == merges);
  check_layout(tokenizer,
               words_of(", a c d e f g h l m n o r v w £ ¤ ¥ © ª ¬ ¯ ¶ Ã Î Ù æ è ð Ġ Ģ Ĺ ĺ ľ ŀ Ł"),
               merges);
  // '!' never occurred in training: it becomes <unk> (id 1).
  check_encodings(
      tokenizer,
      {{"café 日本語😀", {48, 41, 78, 52}}, {"naïve Ωmega", {60, 68, 84}}, {"wörld!", {63, 69, 1}}});
}

TEST_CASE("two sequences; specials cut out at encode time; unseen bytes become <unk>") {
  const std::vector<std::string> texts = {
      "I'm here, you're there! They'll say 123 4567 ... \t tabs  and   spaces",
      "Don't stop 'til we've 2 dogs' toys: the the the; <unk> <unk> lobster"};
  const Merges merges = parse_merges(R"(h e
Ġ t
Ġt he
r e
Ġ s
. .
b s
n k
u nk
Ġ <
' l
' m
' t
' v
' re
1 2
4 5
6 7
D o
T he
a c
a n
a y
a bs
d o
e r
e s
g s
i l
l o
o p
o u
o y
p ac
t er
t il
t op
w e
y ou
Ġ '
Ġ 2
Ġ ĉ
Ġ Ġ
Ġ he
Ġ ..
Ġ 12
Ġ 45
Ġ The
Ġ an
Ġ do
Ġ lo
Ġ we
Ġ you
Ġt abs
Ġt oy
Ġthe re
Ġs ay
Ġs pac
Ġs top
bs ter
'l l
'v e
Do n
Ġhe re
Ġ.. .
Ġ12 3
Ġ45 67
ĠThe y
Ġan d
Ġdo gs
Ġlo bster
Ġtoy s
Ġspac es)");
  const dg::BpeTokenizer tokenizer = dg::train_bpe({texts[0], texts[1]}, 1000, 0, kSpecials);
  CHECK(tokenizer.merges() == merges);
  check_layout(tokenizer,
               words_of("! ' , . 1 2 3 4 5 6 7 : ; < > D I T a b c d e g h i k l m n o p r s t u v "
                        "w y ĉ Ġ"),
               merges);
  check_encodings(tokenizer,
                  {{"species of <unk> lobster", {37, 35, 26, 24, 29, 71, 44, 34, 1, 44, 1, 115}},
                   {"the the <pad>they'll<eos>", {38, 45, 47, 44, 0, 38, 45, 42, 105, 3}},
                   {"Zebra ~ unseen bytes ü", {1,  26, 23, 36, 22, 44, 1,  44, 39, 33, 37,
                                               26, 26, 33, 44, 23, 42, 38, 71, 44, 1,  1}},
                   {"  leading spaces and trailing  ",
                    {44, 44, 31, 26, 22, 25, 29, 33, 27, 117, 113, 46, 36, 22, 73, 29, 33, 27, 87}},
                   {"", {}},
                   {"<unk><unk>", {1, 1}},
                   {"<bos> 123 '<eos>", {2, 110, 84, 3}}});
  // Specials decode to their text; an unseen byte decodes as "<unk>" (the round trip is lossy).
  CHECK(tokenizer.decode(tokenizer.encode("the <eos>they")) == "the <eos>they");
  CHECK(tokenizer.decode(tokenizer.encode("Zü")) == "<unk><unk><unk>");
  CHECK(tokenizer.token_id("<eos>") == 3);
  CHECK(tokenizer.token_id("Ġthe") == 47);
  CHECK(tokenizer.token_id("missing") == -1);
}

TEST_CASE("decode(encode(text)) == text for random strings whose bytes were all seen") {
  // Valid UTF-8 from a pool of characters the training text covers.
  const std::vector<char32_t> pool = {U'a',  U'b',  U'z',  U'Q',   U'0',   U'7', U' ', U' ',
                                      U'\n', U'\t', U'\'', U'!',   U',',   U'<', U'é', U'ü',
                                      U'日', U'本', U'😀',  0x3000, 0x0301, U'٣', U'Ω', 0xA0};
  std::string training;
  for (int repeat = 0; repeat < 3; ++repeat) {
    for (const char32_t c : pool) training += utf8(c) + "s" + utf8(c) + " ";
  }
  const dg::BpeTokenizer tokenizer = dg::train_bpe({training}, 200, 0, kSpecials);
  std::mt19937 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const size_t length = rng() % 30;
    for (size_t i = 0; i < length; ++i) text += utf8(pool[rng() % pool.size()]);
    if (trial % 10 == 0) text += "<unk>";  // a special in the middle of text
    CAPTURE(text);
    const std::vector<int32_t> ids = tokenizer.encode(text);
    CHECK(tokenizer.decode(ids) == text);
    if (trial % 10 != 0) CHECK(std::count(ids.begin(), ids.end(), 1) == 0);
  }
  // Arbitrary bytes (not valid UTF-8) round-trip too when the training text holds all 256.
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  const dg::BpeTokenizer bytes_tokenizer = dg::train_bpe({all_bytes, all_bytes}, 300, 0, {"<unk>"});
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(rng() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 256);
    CHECK(bytes_tokenizer.decode(bytes_tokenizer.encode(bytes)) == bytes);
  }
}

TEST_CASE("full_byte_alphabet: any bytes round-trip; without it the alphabet is what was seen") {
  // The issue's cases: a tab, emoji and CJK that the training text does not hold.
  const std::string training = "the cat sat on the mat. the dog sat on the log.\n";
  std::string corpus;
  for (int i = 0; i < 20; ++i) corpus += training;
  const dg::BpeTokenizer seen_only = dg::train_bpe({corpus}, 300, 2, kSpecials);
  const dg::BpeTokenizer full = dg::train_bpe({corpus}, 300, 2, kSpecials, true);
  for (const std::string text : {"tab\tx", "😀 emoji", "日本語のテキスト", "mixed\x01\xff\xfe"}) {
    CAPTURE(text);
    CHECK(seen_only.decode(seen_only.encode(text)) != text);  // some byte became <unk>
    CHECK(full.decode(full.encode(text)) == text);
    const std::vector<int32_t> ids = full.encode(text);
    CHECK(std::count(ids.begin(), ids.end(), 1) == 0);  // no <unk>
  }
  // The alphabet: 256 byte chars after the 4 specials, in code point order; merges fill the rest.
  CHECK(full.token(4) == "!");
  CHECK(full.token(4 + 255) == "Ń");  // the largest byte char, U+0143
  CHECK(full.merges().size() > 0);
  CHECK(full.vocab_size() == static_cast<int>(4 + 256 + full.merges().size()));
  CHECK(seen_only.vocab_size() < full.vocab_size());
  // Random bytes, invalid UTF-8 included, round-trip exactly; so do they through tokenizer.json.
  const dg::BpeTokenizer reread = dg::BpeTokenizer::from_json(full.to_json(), "full.json");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 256);
    CAPTURE(bytes);
    const std::vector<int32_t> ids = full.encode(bytes);
    CHECK(full.decode(ids) == bytes);
    CHECK(reread.encode(bytes) == ids);
  }
  // A vocabulary smaller than specials + 256 still holds every byte (no merges then).
  const dg::BpeTokenizer tiny = dg::train_bpe({corpus}, 100, 2, kSpecials, true);
  CHECK(tiny.vocab_size() == 260);
  CHECK(tiny.decode(tiny.encode("tab\tx 😀")) == "tab\tx 😀");
}

TEST_CASE("training and encoding errors name the problem") {
  CHECK_THROWS_WITH_AS(dg::train_bpe({"abc"}, -1, 0, {}), doctest::Contains("vocab_size"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::train_bpe({"abc"}, 10, -2, {}), doctest::Contains("min_frequency"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::train_bpe({"abc"}, 10, 0, {"<pad>", "<pad>"}),
                       doctest::Contains("'<pad>' is listed twice"), std::invalid_argument);
  CHECK_THROWS_AS(dg::train_bpe({"abc"}, 10, 0, {""}), std::invalid_argument);
  // A special that is also a byte-level token learned from the text would take that token's id,
  // and the id decodes to the special's text: byte 0 ('Ā') or " a" ('Ġa') could not round-trip
  // (found by fuzz_bpe_train; its input is kept in the corpus).
  using namespace std::string_literals;
  const std::string nul_text = "x\0y"s;
  CHECK_THROWS_WITH_AS(
      dg::train_bpe({nul_text}, 300, 0, {"\xc4\x80"}),
      doctest::Contains("special token 'Ā' is also the byte-level token of the bytes 00"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(dg::train_bpe({"a a a a"}, 300, 0,
                                     {"\xc4\xa0"
                                      "a"}),
                       doctest::Contains("'Ġa' is also the byte-level token of the bytes 20 61"),
                       std::invalid_argument);
  // One that reads as its own bytes shares the id harmlessly: the text still round-trips.
  const dg::BpeTokenizer shared = dg::train_bpe({"ab ab ab"}, 300, 0, {"ab"});
  CHECK(shared.decode(shared.encode("ab ab ab")) == "ab ab ab");
  // Without a "<unk>" token an unseen byte cannot be encoded.
  const dg::BpeTokenizer no_unk = dg::train_bpe({"abc"}, 10, 0, {});
  // a=0 b=1 c=2; (a,b) and (b,c) tie at 1 and (a,b) wins: ab=3, then abc=4.
  CHECK(no_unk.encode("cab") == std::vector<int32_t>{2, 3});
  CHECK(no_unk.encode("abc") == std::vector<int32_t>{4});
  CHECK_THROWS_WITH_AS(no_unk.encode("abd"), doctest::Contains("byte 0x64"), std::runtime_error);
  CHECK_THROWS_AS(no_unk.decode({0, 99}), std::out_of_range);
  CHECK_THROWS_AS(no_unk.token(-1), std::out_of_range);
  // Empty input trains specials only.
  CHECK(dg::train_bpe({}, 100, 0, kSpecials).vocab_size() == 4);
  CHECK(dg::train_bpe({""}, 100, 0, kSpecials).encode("") == std::vector<int32_t>{});
}

TEST_CASE("tokenizer.json is written exactly as Hugging Face writes it, and read back") {
  const dg::BpeTokenizer tokenizer = dg::train_bpe({"a a a aa b ab ab"}, 1000, 0, kSpecials);
  std::string added_tokens;
  for (size_t i = 0; i < kSpecials.size(); ++i) {
    added_tokens += fmt::format(R"(    {{
      "id": {},
      "content": "{}",
      "single_word": false,
      "lstrip": false,
      "rstrip": false,
      "normalized": false,
      "special": true
    }}{})",
                                i, kSpecials[i], i + 1 < kSpecials.size() ? ",\n" : "");
  }
  // Hugging Face's Tokenizer.save(path, pretty=true) of this tokenizer, byte for byte.
  const std::string expected = R"({
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [
)" + added_tokens + R"(
  ],
  "normalizer": null,
  "pre_tokenizer": {
    "type": "ByteLevel",
    "add_prefix_space": false,
    "trim_offsets": true,
    "use_regex": true
  },
  "post_processor": null,
  "decoder": {
    "type": "ByteLevel",
    "add_prefix_space": true,
    "trim_offsets": true,
    "use_regex": true
  },
  "model": {
    "type": "BPE",
    "dropout": null,
    "unk_token": "<unk>",
    "continuing_subword_prefix": null,
    "end_of_word_suffix": null,
    "fuse_unk": false,
    "byte_fallback": false,
    "ignore_merges": false,
    "vocab": {
      "<pad>": 0,
      "<unk>": 1,
      "<bos>": 2,
      "<eos>": 3,
      "a": 4,
      "b": 5,
      "Ġ": 6,
      "Ġa": 7,
      "Ġab": 8,
      "Ġb": 9,
      "Ġaa": 10
    },
    "merges": [
      [
        "Ġ",
        "a"
      ],
      [
        "Ġa",
        "b"
      ],
      [
        "Ġ",
        "b"
      ],
      [
        "Ġa",
        "a"
      ]
    ]
  }
})";
  CHECK(tokenizer.to_json() == expected);

  const dg::BpeTokenizer loaded = dg::BpeTokenizer::from_json(expected, "memory");
  CHECK(loaded.merges() == tokenizer.merges());
  CHECK(loaded.vocab_size() == tokenizer.vocab_size());
  CHECK(loaded.to_json() == expected);
  CHECK(loaded.encode("ab <eos>aab") == tokenizer.encode("ab <eos>aab"));
  REQUIRE(loaded.added_tokens().size() == 4);
  CHECK(loaded.added_tokens()[1].content == "<unk>");
  CHECK(loaded.added_tokens()[1].special);

  // Legacy "left right" merges load the same.
  std::string legacy = R"({"version": "1.0", "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
      "vocab": {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "a": 4, "b": 5, "Ġ": 6, "Ġa": 7, "Ġab": 8, "Ġb": 9, "Ġaa": 10},
      "merges": ["Ġ a", "Ġa b", "Ġ b", "Ġa a"]}})";
  const dg::BpeTokenizer old = dg::BpeTokenizer::from_json(legacy, "legacy.json");
  CHECK(old.merges() == tokenizer.merges());
  CHECK(old.encode("ab aab b") == tokenizer.encode("ab aab b"));

  // save/load through a file.
  const dg::test::TempDir dir("bpe");
  const std::string path = dir.file("tokenizer.json");
  tokenizer.save(path);
  CHECK(dg::read_file(path) == expected);
  CHECK(dg::BpeTokenizer::load(path).merges() == tokenizer.merges());
}

// The vocab object of tokenizer.json at GPT-2 size: written in id order and read back to the
// same text. (Each insert used to scan the object for a duplicate key: 50k entries took seconds.)
TEST_CASE("tokenizer.json with a 50,000-token vocab reads and writes back byte for byte") {
  const dg::BpeTokenizer small = dg::train_bpe({"a a a aa b ab ab"}, 1000, 0, kSpecials);
  const std::string base = small.to_json();
  const std::string vocab_end = "\n    },\n    \"merges\": [";
  const size_t at = base.find(vocab_end);
  REQUIRE(at != std::string::npos);
  std::string extra;
  const int32_t first_id = small.vocab_size(), count = 50000;
  for (int32_t i = 0; i < count; ++i)
    extra += fmt::format(",\n      \"w{:05d}\": {}", i, first_id + i);  // ASCII: byte chars
  const std::string big_json = base.substr(0, at) + extra + base.substr(at);

  const dg::BpeTokenizer big = dg::BpeTokenizer::from_json(big_json, "big.json");
  REQUIRE(big.vocab_size() == first_id + count);
  CHECK(big.token(first_id) == "w00000");
  CHECK(big.token(first_id + count - 1) == "w49999");
  CHECK(big.merges() == small.merges());
  CHECK(big.to_json() == big_json);
  CHECK(big.encode("ab aab b") == small.encode("ab aab b"));
}

TEST_CASE("malformed tokenizer.json files are rejected naming the file and field") {
  const std::string good = dg::train_bpe({"a a a aa b ab ab"}, 1000, 0, kSpecials).to_json();
  const auto replaced = [&](const std::string& from, const std::string& to) {
    const size_t at = good.find(from);
    REQUIRE(at != std::string::npos);
    return good.substr(0, at) + to + good.substr(at + from.size());
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "bad.json"},
      {replaced(R"("version": "1.0")", R"("version": "2.0")"), "version"},
      {replaced(R"("type": "BPE")", R"("type": "WordPiece")"), "model.type"},
      {replaced(R"("dropout": null)", R"("dropout": 0.1)"), "model.dropout"},
      {replaced(R"("add_prefix_space": false)", R"("add_prefix_space": true)"),
       "pre_tokenizer.add_prefix_space"},
      {replaced(R"("normalizer": null)", R"("normalizer": {"type": "NFC"})"), "normalizer"},
      {replaced(R"("byte_fallback": false)", R"("byte_fallback": true)"), "model.byte_fallback"},
      {replaced(R"("Ġaa": 10)", R"("Ġaa": 12)"), "model.vocab[\"Ġaa\"]"},
      {replaced(R"("Ġaa": 10)", R"("Ġaa": 9)"), "id 9 is used twice"},
      {replaced(R"("Ġaa": 10)", R"("Ġaa": "10")"), "model.vocab[\"Ġaa\"]"},
      {replaced(R"("Ġaa": 10)", R"("Ġac": 10)"), "model.merges[3]"},
      {replaced("\"Ġa\",\n        \"a\"", "\"Ġa\""), "model.merges[3]"},
      {replaced(R"("content": "<unk>")", R"("content": "<UNK>")"), "added_tokens[1]"},
      {replaced(R"("lstrip": false)", R"("lstrip": true)"), "added_tokens[0].lstrip"},
      {replaced(R"("merges": [)", R"("merges": {}, "x": [)"), "model.merges"},
      // An added token's id of -1 indexed tokens_[-1]; 2^32 wrapped to 0 (tests/fuzz corpus).
      {replaced(R"("id": 0,)", R"("id": -1,)"), "added_tokens[0].id: -1 is not a valid id"},
      {replaced(R"("id": 0,)", R"("id": 4294967296,)"), "added_tokens[0].id: 4294967296 is not"},
  };
  for (const auto& test_case : cases) {
    const auto& text = test_case.first;  // plain variables: clang < 16 cannot capture bindings
    const auto& field = test_case.second;
    CAPTURE(field);
    try {
      dg::BpeTokenizer::from_json(text, "bad.json");
      FAIL("accepted a malformed tokenizer.json");
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(message.find("bad.json") != std::string::npos);
      CHECK(message.find(field) != std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(dg::BpeTokenizer::load("/nonexistent/tokenizer.json"),
                       doctest::Contains("/nonexistent/tokenizer.json"), std::runtime_error);
}

// The upstream tokenizer: vocab 512, min_frequency 2, specials <pad> <unk> <bos> <eos>, trained on
// the two sequences [WikiText-2 train.txt, Tiny Shakespeare]. Goldens from Hugging Face
// (trained there, then encoded with Tokenizer.encode on the resulting tokenizer.json).
TEST_CASE("full corpus: the upstream 512-token tokenizer matches Hugging Face") {
  const std::optional<std::string> data_dir = dg::test::data_dir_or_skip();
  if (!data_dir) return;
  const std::string dir = *data_dir;
  const std::string train = dg::read_file(dir + "/wikitext-2/train.txt");
  const std::string shakespeare = dg::read_file(dir + "/tiny_shakespeare.txt");
  const std::string valid = dg::read_file(dir + "/wikitext-2/valid.txt");
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };

  auto start = Clock::now();
  const dg::BpeTokenizer tokenizer = dg::train_bpe({train, shakespeare}, 512, 2, kSpecials);
  const double train_seconds = seconds(start);
  REQUIRE(tokenizer.vocab_size() == 512);
  const Merges merges = tokenizer.merges();
  REQUIRE(merges.size() == 330);  // 512 - 4 specials - 178 byte chars
  CHECK(Merges(merges.begin(), merges.begin() + 20) ==
        parse_merges("Ġ t\nh e\nĠ a\ni n\nĠt he\ne r\no n\nr e\nĠ ,\nĠ s\nĠ w\nĠ o\nn d\ne d\na t\n"
                     "Ġ .\nu n\no r\ni t\nĠ f"));
  CHECK(Merges(merges.end() - 10, merges.end()) ==
        parse_merges("Ġtw o\nĠwh o\nm er\nĠT h\nre e\nan ce\ni le\nd u\nl and\nĠa g"));
  for (int id = 0; id < 4; ++id) CHECK(tokenizer.token(id) == kSpecials[id]);
  CHECK(tokenizer.token(4) == "!");
  CHECK(tokenizer.token(147) == "Ġ");
  CHECK(tokenizer.token(181) == "Ń");   // the last alphabet char: U+0143, byte 0xAD
  CHECK(tokenizer.token(182) == "Ġt");  // the first merge
  CHECK(tokenizer.token(511) == "Ġag");

  // Order-sensitive hash of all ids: h = h * 1000003 + id (mod 2^64).
  const auto hash = [](const std::vector<int32_t>& ids) {
    uint64_t h = 0;
    for (const int32_t id : ids) h = h * 1000003u + static_cast<uint64_t>(id);
    return h;
  };
  start = Clock::now();
  const std::vector<int32_t> train_ids = tokenizer.encode(train);
  const double encode_seconds = seconds(start);
  CHECK(train_ids.size() == 4874437);
  CHECK(hash(train_ids) == 0x2f3a32edb6cac273u);
  CHECK(std::count(train_ids.begin(), train_ids.end(), 1) == 54625);  // literal <unk>s

  const std::vector<int32_t> valid_ids = tokenizer.encode(valid);
  CHECK(valid_ids.size() == 494804);
  CHECK(hash(valid_ids) == 0x93bd2d0ad3ebea5du);
  const std::vector<int32_t> first_50 = {
      227, 231, 284, 239, 208, 279, 252, 244, 79,  208, 279, 231, 292, 284, 239, 208, 279,
      252, 244, 79,  208, 279, 190, 362, 80,  457, 270, 186, 334, 87,  224, 82,  71,  210,
      232, 81,  68,  237, 187, 363, 328, 79,  188, 232, 81,  68,  237, 187, 190, 286};
  CHECK(std::vector<int32_t>(valid_ids.begin(), valid_ids.begin() + 50) == first_50);
  CHECK(tokenizer.decode(valid_ids) == valid);

  check_encodings(
      tokenizer,
      {{"species of <unk> lobster", {85, 82, 277, 345, 207, 147, 1, 232, 81, 68, 237, 187}},
       {" \n \n Senjō no Valkyria 3 : <unk> Chronicles",
        {292, 242, 205, 76,  128, 161, 235, 81, 452, 211, 77, 91,
         308, 67,  427, 469, 147, 1,   432, 84, 188, 223, 78, 206}},
       // 0xF0 (the emoji's first byte) never occurs in the corpus: <unk>.
       {"日本 😀 é", {142, 171, 99, 142, 176, 106, 147, 1, 179, 172, 148, 147, 126, 103}}});
  // The saved file reads back to the same tokenizer.
  const dg::BpeTokenizer reloaded = dg::BpeTokenizer::from_json(tokenizer.to_json(), "roundtrip");
  CHECK(reloaded.merges() == merges);
  CHECK(reloaded.encode(valid) == valid_ids);
  MESSAGE(fmt::format("train_bpe on {:.1f} MB: {:.2f} s; encode train.txt ({:.1f} MB): {:.2f} s",
                      (train.size() + shakespeare.size()) / 1e6, train_seconds, train.size() / 1e6,
                      encode_seconds));
}
