// Reading a result.json by path, e.g. "seed_results[1].rd_attnres.lm_loss" (keys cannot contain
// '.' or '['; none of depthgrad's do). A required read throws std::runtime_error naming the path,
// the step that is missing or of the wrong kind and, for a missing key, the keys that are there:
// a mistyped key is an error, never a silent "n/a". A value the writer may legitimately leave out
// is read with an optional_* function, which returns nothing only when the path's last step (key or
// index) is absent; every step before it must exist. It formats nothing.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "train/io/json.h"

namespace dg {

const json::Value& value_at(const json::Value& root, std::string_view path);
// nullptr when only the last step of the path is absent.
const json::Value* optional_value_at(const json::Value& root, std::string_view path);

// An array or an object (throws for other kinds, naming the path).
const json::Array& array_at(const json::Value& root, std::string_view path);
const json::Object& object_at(const json::Value& root, std::string_view path);
// A number (in memory it may be NaN or infinite; formatting shows those as "n/a").
double number_at(const json::Value& root, std::string_view path);
std::optional<double> optional_number_at(const json::Value& root, std::string_view path);
const std::string& string_at(const json::Value& root, std::string_view path);
std::optional<std::string> optional_string_at(const json::Value& root, std::string_view path);
// An array of numbers, and an array of arrays of numbers (rows may differ in length).
std::vector<double> numbers_at(const json::Value& root, std::string_view path);
std::vector<std::vector<double>> matrix_at(const json::Value& root, std::string_view path);

}  // namespace dg
