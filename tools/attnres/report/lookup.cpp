// Path reads of result.json that throw naming the path (see lookup.h).
#include "tools/attnres/report/lookup.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

namespace dg {

using json::Value;

namespace {

[[noreturn]] void fail(std::string_view path, const std::string& what) {
  throw std::runtime_error(fmt::format("result.json: '{}': {}", path, what));
}

// Follows `path`. A missing last step returns nullptr when `last_may_be_absent`; every other
// problem (a missing step before it, a step of the wrong kind, a malformed path) throws.
const Value* walk(const Value& root, std::string_view path, bool last_may_be_absent) {
  const Value* v = &root;
  size_t i = 0;
  std::string_view so_far;  // the path up to the current step, for messages
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      continue;
    }
    const bool index_step = path[i] == '[';
    const size_t end = index_step ? path.find(']', i) : path.find_first_of(".[", i);
    if (index_step && end == std::string_view::npos) fail(path, "unclosed '['");
    const size_t next = index_step ? end + 1 : (end == std::string_view::npos ? path.size() : end);
    const bool last = next >= path.size();
    const std::string where =
        so_far.empty() ? std::string("the result") : fmt::format("'{}'", so_far);
    if (index_step) {
      size_t index = 0;
      const auto [stop, ec] = std::from_chars(path.data() + i + 1, path.data() + end, index);
      if (ec != std::errc() || stop != path.data() + end)
        fail(path, fmt::format("'{}' is not an array index", path.substr(i, end + 1 - i)));
      if (!v->is_array())
        fail(path, fmt::format("{} is {}, not an array", where, json::kind_name(v->kind())));
      if (index >= v->size()) {
        if (last && last_may_be_absent) return nullptr;
        fail(path, fmt::format("{} has {} elements, no [{}]", where, v->size(), index));
      }
      v = &v->as_array()[index];
    } else {
      const std::string_view key = path.substr(i, next - i);
      if (!v->is_object())
        fail(path, fmt::format("{} is {}, not an object with key '{}'", where,
                               json::kind_name(v->kind()), key));
      const Value* child = v->find(key);
      if (!child) {
        if (last && last_may_be_absent) return nullptr;
        std::string keys;
        for (const auto& [k, unused] : v->as_object()) keys += (keys.empty() ? "" : ", ") + k;
        fail(path, fmt::format("{} has no key '{}' (its keys: {})", where, key,
                               keys.empty() ? "none" : keys));
      }
      v = child;
    }
    i = next;
    so_far = path.substr(0, i);
  }
  return v;
}

double as_number(const Value& v, std::string_view path) {
  if (!v.is_number()) fail(path, fmt::format("is {}, not a number", json::kind_name(v.kind())));
  return v.as_double();
}

}  // namespace

const Value& value_at(const Value& root, std::string_view path) { return *walk(root, path, false); }

const Value* optional_value_at(const Value& root, std::string_view path) {
  return walk(root, path, true);
}

const json::Array& array_at(const Value& root, std::string_view path) {
  const Value& v = value_at(root, path);
  if (!v.is_array()) fail(path, fmt::format("is {}, not an array", json::kind_name(v.kind())));
  return v.as_array();
}

const json::Object& object_at(const Value& root, std::string_view path) {
  const Value& v = value_at(root, path);
  if (!v.is_object()) fail(path, fmt::format("is {}, not an object", json::kind_name(v.kind())));
  return v.as_object();
}

double number_at(const Value& root, std::string_view path) {
  return as_number(value_at(root, path), path);
}

std::optional<double> optional_number_at(const Value& root, std::string_view path) {
  const Value* v = optional_value_at(root, path);
  if (!v) return std::nullopt;
  return as_number(*v, path);
}

const std::string& string_at(const Value& root, std::string_view path) {
  const Value& v = value_at(root, path);
  if (!v.is_string()) fail(path, fmt::format("is {}, not a string", json::kind_name(v.kind())));
  return v.as_string();
}

std::optional<std::string> optional_string_at(const Value& root, std::string_view path) {
  if (!optional_value_at(root, path)) return std::nullopt;
  return string_at(root, path);
}

std::vector<double> numbers_at(const Value& root, std::string_view path) {
  const json::Array& a = array_at(root, path);
  std::vector<double> out;
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(as_number(a[i], fmt::format("{}[{}]", path, i)));
  return out;
}

std::vector<std::vector<double>> matrix_at(const Value& root, std::string_view path) {
  const size_t rows = array_at(root, path).size();
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < rows; ++i) out.push_back(numbers_at(root, fmt::format("{}[{}]", path, i)));
  return out;
}

}  // namespace dg
