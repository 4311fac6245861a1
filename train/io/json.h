// A small, strict JSON (RFC 8259) value type, parser and writer for configs, tokenizers,
// run records and safetensors headers. Objects keep insertion order; integers stay exact int64.
// Deliberately no comments, trailing commas, NaN/Infinity, duplicate keys or invalid UTF-8.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace dg::json {

class Value;
using Array = std::vector<Value>;

// An object's members, in insertion order (the order dump writes them), with a hash index on
// the keys. Members never move: a reference to a member (from Value::operator[], find, indexing
// or iteration) stays valid until the object is destroyed or assigned to, however many members
// are added after it. Keys are unique. There is no erase.
class Object {
 public:
  using Member = std::pair<const std::string, Value>;

  Object();
  Object(const Object& other);
  Object(Object&& other) noexcept;
  Object& operator=(const Object& other);
  Object& operator=(Object&& other) noexcept;
  ~Object();

  // Appends a member; throws std::invalid_argument naming the key when it is already present.
  Member& emplace_back(std::string key, Value value);
  // The member's value, or nullptr when the key is absent. O(1) on average.
  Value* find(std::string_view key);
  const Value* find(std::string_view key) const;

  size_t size() const { return members_.size(); }
  // (Not members_.empty(): clang 14 would look up that vector's iterator == while Value is
  // still incomplete here.)
  bool empty() const { return members_.size() == 0; }
  // The index-th member in insertion order (unchecked, like std::vector).
  Member& operator[](size_t index);
  const Member& operator[](size_t index) const;

  // Iteration in insertion order yields Member& (const Member& on a const Object).
  template <class M, class Base>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Member;
    using difference_type = std::ptrdiff_t;
    using pointer = M*;
    using reference = M&;
    Iterator() = default;
    explicit Iterator(Base it) : it_(it) {}
    M& operator*() const { return **it_; }
    M* operator->() const { return it_->get(); }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    Iterator operator++(int) { return Iterator(it_++); }
    bool operator==(const Iterator& other) const { return it_ == other.it_; }

   private:
    Base it_{};
  };
  using Storage = std::vector<std::unique_ptr<Member>>;
  using iterator = Iterator<Member, Storage::iterator>;
  using const_iterator = Iterator<const Member, Storage::const_iterator>;
  iterator begin() { return iterator(members_.begin()); }
  iterator end() { return iterator(members_.end()); }
  const_iterator begin() const { return const_iterator(members_.begin()); }
  const_iterator end() const { return const_iterator(members_.end()); }

  // Same members in the same order.
  friend bool operator==(const Object& a, const Object& b);

 private:
  Storage members_;  // each member on the heap, so that growing the vector moves no member
  std::unordered_map<std::string_view, size_t>
      index_;  // key (viewing the member's own) -> position
};

enum class Kind { null, boolean, number, string, array, object };

// "null", "boolean", "number", "string", "array" or "object".
const char* kind_name(Kind kind);

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool value) : data_(value) {}
  // Any integer type (int, int64_t, uint64_t, size_t, ...); unsigned values above
  // INT64_MAX throw std::out_of_range. char and bool are not integers here.
  // (Unformatted: this clang-format folds the requires clause into the declaration.)
  // clang-format off
  template <std::integral T>
    requires(!std::same_as<T, bool> && !std::same_as<T, char>)
  Value(T value) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (value > static_cast<T>(INT64_MAX)) throw_unsigned_out_of_range(value);
    }
    data_ = static_cast<int64_t>(value);
  }
  // clang-format on
  Value(double value) : data_(value) {}
  Value(const char* value) : data_(std::string(value)) {}
  Value(std::string value) : data_(std::move(value)) {}
  Value(std::string_view value) : data_(std::string(value)) {}
  Value(Array value) : data_(std::move(value)) {}
  Value(Object value) : data_(std::move(value)) {}

  Kind kind() const;
  bool is_null() const { return kind() == Kind::null; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_number() const { return kind() == Kind::number; }
  // A number that was written (or built) as an integer, held exactly.
  bool is_integer() const { return std::holds_alternative<int64_t>(data_); }
  bool is_string() const { return kind() == Kind::string; }
  bool is_array() const { return kind() == Kind::array; }
  bool is_object() const { return kind() == Kind::object; }

  // Each throws std::runtime_error naming the expected and the actual kind.
  bool as_bool() const;
  // An integer, or a double with an exact int64 value (3.0); otherwise throws.
  int64_t as_int() const;
  double as_double() const;  // integers are converted
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object lookup (hashed). find returns nullptr when the key is absent; both throw when this
  // is not an object. at throws naming the key when absent.
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key) const;
  // Array element; throws naming the index and size when out of range.
  const Value& at(size_t index) const;
  // Insert-or-get on an object; a null becomes an empty object first. The reference stays valid
  // when more members are inserted (see Object).
  Value& operator[](std::string_view key);
  // Appends to an array; a null becomes an empty array first.
  void push_back(Value value);
  // Elements of an array or members of an object; throws for other kinds.
  size_t size() const;

  // Same kind and equal contents (object member order matters); numbers compare by value.
  friend bool operator==(const Value& a, const Value& b);

 private:
  [[noreturn]] static void throw_unsigned_out_of_range(uint64_t value);
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> data_{nullptr};
};

inline Object::Member& Object::operator[](size_t index) { return *members_[index]; }
inline const Object::Member& Object::operator[](size_t index) const { return *members_[index]; }

// Parses one JSON text. Errors are std::runtime_error
// "<source_name>: JSON error at line L column C: <what>" (column counted in bytes, from 1).
Value parse(std::string_view text, const std::string& source_name);

// Compact when indent < 0, otherwise one member per line indented by `indent` spaces.
// Doubles are written in the shortest form that reads back to the same double (with ".0"
// added to integral values so they stay doubles); NaN, infinities and strings that are not
// valid UTF-8 throw std::runtime_error.
std::string dump(const Value& value, int indent = -1);

}  // namespace dg::json
