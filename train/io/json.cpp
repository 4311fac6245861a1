// JSON parser (recursive descent with a depth limit) and writer for dg::json::Value.
// The parser checks the whole RFC 8259 grammar and UTF-8; it does not recover from errors.
#include "train/io/json.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "train/io/utf8.h"

namespace dg::json {

namespace {

constexpr int kMaxDepth = 512;

// Number of bytes of the well-formed UTF-8 sequence starting at text[pos], or 0 when there is none.
size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const Utf8Char c = decode_utf8(text, pos);
  return c.valid ? static_cast<size_t>(c.length) : 0;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source_name)
      : text_(text), source_name_(source_name) {}

  Value parse_document() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") fail("byte order mark is not allowed");
    skip_whitespace();
    if (at_end()) fail("empty input, expected a value");
    Value value = parse_value(0);
    skip_whitespace();
    if (!at_end()) fail(fmt::format("unexpected {} after the value", describe_here()));
    return value;
  }

 private:
  std::string_view text_;
  const std::string& source_name_;
  size_t pos_ = 0;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw std::runtime_error(
        fmt::format("{}: JSON error at line {} column {}: {}", source_name_, line, column, what));
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  std::string describe_here() const {
    if (at_end()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c >= 0x20 && c < 0x7F) return fmt::format("character '{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02X}", c);
  }

  void skip_whitespace() {
    while (!at_end()) {
      const char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  void expect_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      fail(fmt::format("invalid literal, expected '{}'", word));
    pos_ += word.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of input, expected a value");
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Value(parse_string());
      case 't':
        expect_literal("true");
        return Value(true);
      case 'f':
        expect_literal("false");
        return Value(false);
      case 'n':
        expect_literal("null");
        return Value(nullptr);
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(fmt::format("unexpected {}, expected a value", describe_here()));
    }
  }

  Value parse_object(int depth) {
    if (depth > kMaxDepth) fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
    ++pos_;  // '{'
    Object members;
    skip_whitespace();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_whitespace();
      if (at_end() || peek() != '"')
        fail(fmt::format("unexpected {}, expected a string key", describe_here()));
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (members.find(key)) fail_at(key_pos, fmt::format("duplicate key \"{}\"", key));
      skip_whitespace();
      if (at_end() || peek() != ':')
        fail(fmt::format("unexpected {}, expected ':'", describe_here()));
      ++pos_;
      skip_whitespace();
      Value member = parse_value(depth);
      members.emplace_back(std::move(key), std::move(member));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an object, expected ',' or '}'");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return Value(std::move(members));
      }
      fail(fmt::format("unexpected {} inside an object, expected ',' or '}}'", describe_here()));
    }
  }

  Value parse_array(int depth) {
    if (depth > kMaxDepth) fail(fmt::format("nesting deeper than {} levels", kMaxDepth));
    ++pos_;  // '['
    Array elements;
    skip_whitespace();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return Value(std::move(elements));
    }
    while (true) {
      skip_whitespace();
      elements.push_back(parse_value(depth));
      skip_whitespace();
      if (at_end()) fail("unexpected end of input inside an array, expected ',' or ']'");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return Value(std::move(elements));
      }
      fail(fmt::format("unexpected {} inside an array, expected ',' or ']'", describe_here()));
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_ + i];
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        fail_at(pos_ + i, "invalid hex digit in \\u escape");
      code = code * 16 + digit;
    }
    pos_ += 4;
    return code;
  }

  std::string parse_string() {
    const size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail(fmt::format("unescaped control character 0x{:02X} in string", c));
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail_at(start, "unterminated string");
        const char escape = peek();
        ++pos_;
        switch (escape) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            const size_t escape_pos = pos_ - 2;
            uint32_t code = parse_hex4();
            if (code >= 0xDC00 && code <= 0xDFFF)
              fail_at(escape_pos, "lone low surrogate in \\u escape");
            if (code >= 0xD800 && code <= 0xDBFF) {
              if (text_.substr(pos_, 2) != "\\u")
                fail_at(escape_pos, "high surrogate not followed by a low surrogate");
              pos_ += 2;
              const uint32_t low = parse_hex4();
              if (low < 0xDC00 || low > 0xDFFF)
                fail_at(escape_pos, "high surrogate not followed by a low surrogate");
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, code);
            break;
          }
          default:
            fail_at(pos_ - 2, fmt::format("invalid escape '\\{}'", escape));
        }
        continue;
      }
      const size_t length = utf8_sequence_length(text_, pos_);
      if (length == 0) fail("invalid UTF-8 in string");
      out.append(text_.substr(pos_, length));
      pos_ += length;
    }
  }

  Value parse_number() {
    const size_t start = pos_;
    bool is_integer = true;
    if (peek() == '-') ++pos_;
    const auto digits = [&]() {
      const size_t first = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - first;
    };
    if (at_end() || !(peek() >= '0' && peek() <= '9')) fail("invalid number: expected a digit");
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && peek() >= '0' && peek() <= '9')
        fail_at(start, "invalid number: leading zero");
    } else {
      digits();
    }
    if (!at_end() && peek() == '.') {
      is_integer = false;
      ++pos_;
      if (digits() == 0) fail("invalid number: expected a digit after '.'");
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      is_integer = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (digits() == 0) fail("invalid number: expected a digit in the exponent");
    }
    const std::string_view token = text_.substr(start, pos_ - start);
    const char* first = token.data();
    const char* last = token.data() + token.size();
    if (is_integer) {
      int64_t value = 0;
      const auto result = std::from_chars(first, last, value);
      if (result.ec == std::errc() && result.ptr == last) return Value(value);
      // Too large for int64: fall through and keep it as a double.
    }
    double value = 0;
    const auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc::result_out_of_range) {
      // Underflow reads as a (sub)normal or zero; overflow is an error.
      value = std::strtod(std::string(token).c_str(), nullptr);
      if (std::isinf(value))
        fail_at(start, fmt::format("number {} is out of the double range", token));
    } else if (result.ec != std::errc() || result.ptr != last) {
      fail_at(start, fmt::format("invalid number {}", token));
    }
    return Value(value);
  }
};

void write_string(std::string& out, const std::string& text) {
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = utf8_sequence_length(text, i);
      if (length == 0)
        throw std::runtime_error(fmt::format(
            "JSON dump: string has invalid UTF-8 at byte {} (0x{:02X}); JSON strings must be UTF-8",
            i, c));
      out.append(text, i, length);
      i += length;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

void write_double(std::string& out, double value) {
  if (!std::isfinite(value))
    throw std::runtime_error(fmt::format(
        "JSON dump: {} is not a JSON number (NaN and infinities are not allowed)", value));
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  out += text;
}

void write_newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(indent) * depth, ' ');
}

void write_value(std::string& out, const Value& value, int indent, int depth) {
  switch (value.kind()) {
    case Kind::null:
      out += "null";
      return;
    case Kind::boolean:
      out += value.as_bool() ? "true" : "false";
      return;
    case Kind::number:
      if (value.is_integer())
        out += fmt::format("{}", value.as_int());
      else
        write_double(out, value.as_double());
      return;
    case Kind::string:
      write_string(out, value.as_string());
      return;
    case Kind::array: {
      const Array& elements = value.as_array();
      if (elements.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < elements.size(); ++i) {
        if (i > 0) out += ',';
        if (indent >= 0) write_newline(out, indent, depth + 1);
        write_value(out, elements[i], indent, depth + 1);
      }
      if (indent >= 0) write_newline(out, indent, depth);
      out += ']';
      return;
    }
    case Kind::object: {
      const Object& members = value.as_object();
      if (members.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out += ',';
        if (indent >= 0) write_newline(out, indent, depth + 1);
        write_string(out, members[i].first);
        out += indent >= 0 ? ": " : ":";
        write_value(out, members[i].second, indent, depth + 1);
      }
      if (indent >= 0) write_newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

Object::Object() = default;
Object::Object(Object&& other) noexcept = default;  // moves the pointers: the key views stay valid
Object& Object::operator=(Object&& other) noexcept = default;
Object::~Object() = default;

Object::Object(const Object& other) {
  members_.reserve(other.members_.size());
  index_.reserve(other.members_.size());
  for (const auto& member : other.members_) emplace_back(member->first, member->second);
}

Object& Object::operator=(const Object& other) {
  if (this != &other) *this = Object(other);
  return *this;
}

Object::Member& Object::emplace_back(std::string key, Value value) {
  if (index_.count(key) != 0)
    throw std::invalid_argument(fmt::format("JSON object: duplicate key \"{}\"", key));
  members_.push_back(std::make_unique<Member>(std::move(key), std::move(value)));
  Member& member = *members_.back();
  try {
    index_.emplace(std::string_view(member.first), members_.size() - 1);
  } catch (...) {
    members_.pop_back();
    throw;
  }
  return member;
}

Value* Object::find(std::string_view key) {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &members_[it->second]->second;
}

const Value* Object::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &members_[it->second]->second;
}

bool operator==(const Object& a, const Object& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || !(a[i].second == b[i].second)) return false;
  return true;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::null:
      return "null";
    case Kind::boolean:
      return "boolean";
    case Kind::number:
      return "number";
    case Kind::string:
      return "string";
    case Kind::array:
      return "array";
    case Kind::object:
      return "object";
  }
  return "unknown";
}

void Value::throw_unsigned_out_of_range(uint64_t value) {
  throw std::out_of_range(
      fmt::format("JSON value: unsigned integer {} is larger than the int64 maximum", value));
}

Kind Value::kind() const {
  switch (data_.index()) {
    case 0:
      return Kind::null;
    case 1:
      return Kind::boolean;
    case 2:
    case 3:
      return Kind::number;
    case 4:
      return Kind::string;
    case 5:
      return Kind::array;
    default:
      return Kind::object;
  }
}

namespace {
[[noreturn]] void wrong_kind(const char* expected, Kind actual) {
  throw std::runtime_error(
      fmt::format("JSON value: expected {}, got {}", expected, kind_name(actual)));
}
}  // namespace

bool Value::as_bool() const {
  if (const bool* value = std::get_if<bool>(&data_)) return *value;
  wrong_kind("boolean", kind());
}

int64_t Value::as_int() const {
  if (const int64_t* value = std::get_if<int64_t>(&data_)) return *value;
  if (const double* value = std::get_if<double>(&data_)) {
    // The range check is on [-2^63, 2^63): both bounds are exact doubles.
    if (std::trunc(*value) == *value && *value >= -9223372036854775808.0 &&
        *value < 9223372036854775808.0)
      return static_cast<int64_t>(*value);
    throw std::runtime_error(
        fmt::format("JSON value: expected an integer, got the number {}", *value));
  }
  wrong_kind("integer", kind());
}

double Value::as_double() const {
  if (const double* value = std::get_if<double>(&data_)) return *value;
  if (const int64_t* value = std::get_if<int64_t>(&data_)) return static_cast<double>(*value);
  wrong_kind("number", kind());
}

const std::string& Value::as_string() const {
  if (const std::string* value = std::get_if<std::string>(&data_)) return *value;
  wrong_kind("string", kind());
}

const Array& Value::as_array() const {
  if (const Array* value = std::get_if<Array>(&data_)) return *value;
  wrong_kind("array", kind());
}

Array& Value::as_array() {
  if (Array* value = std::get_if<Array>(&data_)) return *value;
  wrong_kind("array", kind());
}

const Object& Value::as_object() const {
  if (const Object* value = std::get_if<Object>(&data_)) return *value;
  wrong_kind("object", kind());
}

Object& Value::as_object() {
  if (Object* value = std::get_if<Object>(&data_)) return *value;
  wrong_kind("object", kind());
}

const Value* Value::find(std::string_view key) const { return as_object().find(key); }

const Value& Value::at(std::string_view key) const {
  if (const Value* member = find(key)) return *member;
  throw std::runtime_error(fmt::format("JSON value: object has no key \"{}\"", key));
}

const Value& Value::at(size_t index) const {
  const Array& elements = as_array();
  if (index >= elements.size())
    throw std::runtime_error(fmt::format("JSON value: index {} out of range for an array of {}",
                                         index, elements.size()));
  return elements[index];
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) data_ = Object{};
  Object& members = as_object();
  if (Value* member = members.find(key)) return *member;
  return members.emplace_back(std::string(key), Value()).second;
}

void Value::push_back(Value value) {
  if (is_null()) data_ = Array{};
  as_array().push_back(std::move(value));
}

size_t Value::size() const {
  if (const Array* elements = std::get_if<Array>(&data_)) return elements->size();
  if (const Object* members = std::get_if<Object>(&data_)) return members->size();
  wrong_kind("array or object", kind());
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  return a.data_ == b.data_;
}

Value parse(std::string_view text, const std::string& source_name) {
  return Parser(text, source_name).parse_document();
}

std::string dump(const Value& value, int indent) {
  std::string out;
  write_value(out, value, indent, 0);
  return out;
}

}  // namespace dg::json
