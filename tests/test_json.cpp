// JSON value, parser and writer: grammar edge cases, error positions, UTF-8, round trips.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "train/io/json.h"

using dg::json::Array;
using dg::json::dump;
using dg::json::Kind;
using dg::json::Object;
using dg::json::parse;
using dg::json::Value;

namespace {
Value p(std::string_view text) { return parse(text, "test.json"); }

std::string parse_error(std::string_view text) {
  try {
    parse(text, "in.json");
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("json: scalars parse to the right kinds") {
  CHECK(p("null").is_null());
  CHECK(p("true").as_bool() == true);
  CHECK(p(" false ").as_bool() == false);
  CHECK(p("\"hi\"").as_string() == "hi");
  CHECK(p("0").as_int() == 0);
  CHECK(p("-17").as_int() == -17);
  CHECK(p("9223372036854775807").as_int() == std::numeric_limits<int64_t>::max());
  CHECK(p("-9223372036854775808").as_int() == std::numeric_limits<int64_t>::min());
  CHECK(p("42").is_integer());
  CHECK_FALSE(p("42.0").is_integer());
  CHECK(p("42.0").as_int() == 42);  // an exact integral double converts
  CHECK(p("1.5").as_double() == 1.5);
  CHECK(p("-2.5e-3").as_double() == -2.5e-3);
  CHECK(p("1E+2").as_double() == 100.0);
  // Larger than int64: kept as a double.
  const Value big = p("18446744073709551616");
  CHECK_FALSE(big.is_integer());
  CHECK(big.as_double() == 18446744073709551616.0);
  // Underflow reads as zero-ish, overflow is an error.
  CHECK(p("1e-400").as_double() == 0.0);
  CHECK(parse_error("1e400").find("out of the double range") != std::string::npos);
}

TEST_CASE("json: accessors name expected and actual kinds") {
  CHECK_THROWS_WITH_AS(p("\"x\"").as_int(), doctest::Contains("expected integer, got string"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(p("[1]").as_object(), doctest::Contains("expected object, got array"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(p("1.5").as_int(),
                       doctest::Contains("expected an integer, got the number 1.5"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(p("{}").as_bool(), doctest::Contains("expected boolean, got object"),
                       std::runtime_error);
  const Value object = p(R"({"a": 1, "b": [true, null]})");
  CHECK(object.at("a").as_int() == 1);
  CHECK(object.find("zzz") == nullptr);
  CHECK_THROWS_WITH_AS(object.at("zzz"), doctest::Contains("no key \"zzz\""), std::runtime_error);
  CHECK(object.at("b").size() == 2);
  CHECK(object.at("b").at(size_t{1}).is_null());
  CHECK_THROWS_WITH_AS(object.at("b").at(size_t{2}), doctest::Contains("index 2 out of range"),
                       std::runtime_error);
  CHECK_THROWS(Value(3).size());
  CHECK_THROWS_AS(Value{std::numeric_limits<uint64_t>::max()}, std::out_of_range);
  CHECK(Value(uint64_t{5}).as_int() == 5);
}

TEST_CASE("json: objects keep insertion order and operator[] inserts") {
  Value v;
  v["zeta"] = 1;
  v["alpha"] = "two";
  v["mid"]["inner"] = 3.5;
  v["zeta"] = 10;  // overwrite keeps position
  v["list"].push_back(1);
  v["list"].push_back("x");
  CHECK(dump(v) == R"({"zeta":10,"alpha":"two","mid":{"inner":3.5},"list":[1,"x"]})");
  const Value parsed = p(R"({"b":1,"a":2,"c":3})");
  const Object& members = parsed.as_object();
  REQUIRE(members.size() == 3);
  CHECK(members[0].first == "b");
  CHECK(members[1].first == "a");
  CHECK(members[2].first == "c");
  CHECK_THROWS_WITH_AS(Value(1)["x"], doctest::Contains("expected object, got number"),
                       std::runtime_error);
}

TEST_CASE("json: strings, escapes, surrogate pairs and UTF-8") {
  CHECK(p(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(p(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
  // U+1F600 as a surrogate pair, and raw.
  CHECK(p(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");
  CHECK(p("\"\xF0\x9F\x98\x80\"").as_string() == "\xF0\x9F\x98\x80");
  CHECK(p(R"("\u0000")").as_string() == std::string(1, '\0'));
  CHECK(parse_error(R"("\ud83d")").find("high surrogate not followed by a low surrogate") !=
        std::string::npos);
  CHECK(parse_error(R"("\ude00")").find("lone low surrogate") != std::string::npos);
  CHECK(parse_error(R"("\u12G4")").find("invalid hex digit") != std::string::npos);
  CHECK(parse_error(R"("\x")").find("invalid escape") != std::string::npos);
  CHECK(parse_error("\"a\tb\"").find("unescaped control character 0x09") != std::string::npos);
  CHECK(parse_error("\"abc").find("unterminated string") != std::string::npos);
  // Invalid UTF-8: a lone continuation byte, an overlong '/', an encoded surrogate, a truncation.
  CHECK(parse_error("\"\x80\"").find("invalid UTF-8") != std::string::npos);
  CHECK(parse_error("\"\xC0\xAF\"").find("invalid UTF-8") != std::string::npos);
  CHECK(parse_error("\"\xED\xA0\x80\"").find("invalid UTF-8") != std::string::npos);
  CHECK(parse_error("\"\xE2\x82\"").find("invalid UTF-8") != std::string::npos);
  // The writer: non-ASCII raw, control characters escaped, invalid UTF-8 refused.
  CHECK(dump(Value("caf\xC3\xA9 \x01\n\"\\")) == "\"caf\xC3\xA9 \\u0001\\n\\\"\\\\\"");
  CHECK_THROWS_WITH_AS(dump(Value("bad \xFF")), doctest::Contains("invalid UTF-8"),
                       std::runtime_error);
}

TEST_CASE("json: grammar errors report line and column") {
  CHECK(parse_error("{\n  \"a\": 1,\n}") ==
        "in.json: JSON error at line 3 column 1: unexpected character '}', expected a string key");
  CHECK(parse_error("[1, 2,]") ==
        "in.json: JSON error at line 1 column 7: unexpected character ']', expected a value");
  CHECK(parse_error("[1 2]").find("line 1 column 4: unexpected character '2' inside an array") !=
        std::string::npos);
  CHECK(parse_error("").find("empty input") != std::string::npos);
  CHECK(parse_error("1 2").find("line 1 column 3: unexpected character '2' after the value") !=
        std::string::npos);
  CHECK(parse_error("01").find("leading zero") != std::string::npos);
  CHECK(parse_error("1.").find("digit after '.'") != std::string::npos);
  CHECK(parse_error(".5").find("expected a value") != std::string::npos);
  CHECK(parse_error("1e").find("exponent") != std::string::npos);
  CHECK(parse_error("-").find("expected a digit") != std::string::npos);
  CHECK(parse_error("+1").find("expected a value") != std::string::npos);
  CHECK(parse_error("NaN").find("expected a value") != std::string::npos);
  CHECK(parse_error("tru").find("expected 'true'") != std::string::npos);
  CHECK(parse_error("{\"a\" 1}").find("expected ':'") != std::string::npos);
  CHECK(parse_error("{\"a\":1,\"a\":2}").find("line 1 column 8: duplicate key \"a\"") !=
        std::string::npos);
  CHECK(parse_error("{'a':1}").find("expected a string key") != std::string::npos);
  CHECK(parse_error("[1,2").find("end of input inside an array") != std::string::npos);
  CHECK(parse_error("\xEF\xBB\xBF{}").find("byte order mark") != std::string::npos);
  CHECK(parse_error("[1]\x01").find("byte 0x01") != std::string::npos);
  // Nesting: 512 levels are fine, 513 are refused.
  CHECK(p(std::string(512, '[') + std::string(512, ']')).is_array());
  CHECK(
      parse_error(std::string(513, '[') + std::string(513, ']')).find("nesting deeper than 512") !=
      std::string::npos);
  CHECK(parse_error(std::string(100000, '[')).find("nesting deeper than 512") != std::string::npos);
}

TEST_CASE("json: doubles round-trip in shortest form and stay doubles") {
  CHECK(dump(Value(0.1)) == "0.1");
  CHECK(dump(Value(1.0)) == "1.0");
  CHECK(dump(Value(-0.0)) == "-0.0");
  CHECK(dump(Value(1e300)) == "1e+300");
  CHECK(dump(Value(int64_t{-9007199254740993})) == "-9007199254740993");
  CHECK_THROWS_WITH_AS(dump(Value(std::nan(""))), doctest::Contains("NaN and infinities"),
                       std::runtime_error);
  CHECK_THROWS(dump(Value(std::numeric_limits<double>::infinity())));
  // Round trip a spread of awkward doubles bit-exactly.
  const double samples[] = {0.1 + 0.2,
                            1.0 / 3.0,
                            5e-324,
                            2.2250738585072014e-308,
                            1.7976931348623157e308,
                            123456789.125,
                            -6e-4,
                            3.0,
                            1e21,
                            1e-7};
  for (double x : samples) {
    const Value back = p(dump(Value(x)));
    CHECK_FALSE(back.is_integer());
    CHECK(back.as_double() == x);
  }
}

TEST_CASE("json: pretty and compact dumps parse back to equal values") {
  const std::string text =
      R"({"name":"dg","n":3,"x":-1.25,"ok":true,"none":null,"list":[1,[2,{}],[]],"obj":{"k":"v"}})";
  const Value v = p(text);
  CHECK(dump(v) == text);
  const std::string pretty = dump(v, 2);
  CHECK(pretty ==
        "{\n"
        "  \"name\": \"dg\",\n"
        "  \"n\": 3,\n"
        "  \"x\": -1.25,\n"
        "  \"ok\": true,\n"
        "  \"none\": null,\n"
        "  \"list\": [\n"
        "    1,\n"
        "    [\n"
        "      2,\n"
        "      {}\n"
        "    ],\n"
        "    []\n"
        "  ],\n"
        "  \"obj\": {\n"
        "    \"k\": \"v\"\n"
        "  }\n"
        "}");
  CHECK(p(pretty) == v);
  CHECK_FALSE(p(R"({"a":1,"b":2})") == p(R"({"b":2,"a":1})"));
  CHECK(p("[1, 2.0]") == p("[1.0, 2]"));  // numbers compare by value
  CHECK_FALSE(p("[1]") == p("[\"1\"]"));
  CHECK(p(" \t\r\n[ ]\n ").size() == 0);
}

TEST_CASE("json: mutated documents either parse and round-trip, or throw runtime_error") {
  const std::string seed_text =
      R"({"a":[1,-2.5e3,true,false,null],"s":"x\u00e9\ud83d\ude00\n","o":{"k":[{},[]],"n":12345678901234}})";
  std::mt19937 random(12345);
  int parsed = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = seed_text;
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = random() % text.size();
      switch (random() % 3) {
        case 0:
          text[at] = static_cast<char>(random() % 256);
          break;
        case 1:
          text.erase(at, 1);
          break;
        default:
          text.insert(at, 1, "{}[],:\"\\0.e-"[random() % 12]);
          break;
      }
    }
    try {
      const Value value = parse(text, "fuzz");
      ++parsed;
      CHECK(parse(dump(value), "again") == value);
    } catch (const std::runtime_error& error) {
      ++refused;
      CHECK(std::string(error.what()).rfind("fuzz: JSON error at line ", 0) == 0);
    }
  }
  CHECK(parsed + refused == 3000);
  CHECK(refused > 0);
  CHECK(parsed > 0);
}

TEST_CASE("json: a reference from operator[] survives later inserts (members never move)") {
  Value root;
  Value& first = root["first"];
  const Value* const first_address = &first;
  for (int i = 0; i < 1000; ++i) root[fmt::format("k{}", i)] = i;
  // With the members in a growing vector the inserts above reallocate and `first` dangles.
  REQUIRE(&root["first"] == first_address);
  first = "still here";
  CHECK(root.at("first").as_string() == "still here");
  // The tokenizer's pattern: hold a nested object, add siblings, then fill it.
  Value& model = root["model"];
  Value& vocab = model["vocab"];
  for (int i = 0; i < 100; ++i) model[fmt::format("field{}", i)] = i;
  vocab["a"] = 1;
  CHECK(root.at("model").at("vocab").at("a").as_int() == 1);
  // Insertion order is the output order, as before.
  const std::string text = dump(root);
  CHECK(text.rfind(R"({"first":"still here","k0":0,"k1":1,"k2":2,)", 0) == 0);
  CHECK(text.find(R"("model":{"vocab":{"a":1},"field0":0,)") != std::string::npos);
  CHECK(parse(text, "again") == root);
}

TEST_CASE("json: Object keeps keys unique, copies independently, moves without moving members") {
  Object o;
  o.emplace_back("a", 1);
  o.emplace_back("b", "two");
  CHECK_THROWS_WITH_AS(o.emplace_back("a", 3), doctest::Contains("duplicate key \"a\""),
                       std::invalid_argument);
  CHECK(o.size() == 2);
  REQUIRE(o.find("b") != nullptr);
  CHECK(o.find("b")->as_string() == "two");
  CHECK(o.find("c") == nullptr);
  CHECK(o[1].first == "b");
  std::string keys;
  for (const auto& [key, value] : o) keys += key;
  CHECK(keys == "ab");

  Value original(o);
  Value copy = original;  // its own members and its own index
  copy["a"] = 10;
  copy["c"] = 3;
  CHECK(original.at("a").as_int() == 1);
  CHECK(original.find("c") == nullptr);
  CHECK(copy.at("a").as_int() == 10);
  CHECK(dump(copy) == R"({"a":10,"b":"two","c":3})");
  CHECK_FALSE(copy == original);

  Value& b = original["b"];
  Value moved = std::move(original);
  CHECK(&moved["b"] == &b);  // a move hands the members over
  CHECK(moved.at("b").as_string() == "two");
}

TEST_CASE("json: 50,000 members insert and look up in linear time, in insertion order") {
  Value v;
  for (int i = 0; i < 50000; ++i) v[fmt::format("token{}", i)] = i;
  REQUIRE(v.size() == 50000);
  for (int i = 0; i < 50000; i += 997) CHECK(v.at(fmt::format("token{}", i)).as_int() == i);
  const Object& members = v.as_object();
  CHECK(members[0].first == "token0");
  CHECK(members[49999].first == "token49999");
  CHECK(parse(dump(v), "big") == v);
}
