// One declaration per setting: a config's fields as rows (section, key, type, range, one-line doc,
// an accessor into the struct; the default is the struct's own initializer), and the operations
// every row gets from that: its JSON value, reading it back with the type and range checked, and
// the error that names the key. The training loop's rows are in train/training_config.cpp; an
// application's configuration declares its own the same way, and its flags, help and docs can
// come from the same rows. Cross-field rules (heads dividing dim) are not rows: the config's own
// validation has them.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "train/io/json.h"

namespace dg {

enum class SettingType { integer, number, boolean, string };
const char* setting_type_name(SettingType type);  // integer, number, boolean, string

// The values a numeric setting accepts: finite, from low to high, either end open or closed.
struct SettingRange {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool low_open = false, high_open = false;
  bool contains(double x) const;
  std::string describe() const;  // ">= 1", "> 0", ">= 0 and < 1"
};
inline SettingRange at_least(double low) { return {.low = low}; }
inline SettingRange above(double low) { return {.low = low, .low_open = true}; }

template <class S>
struct Setting {
  std::string section, key;  // JSON: section.key ("training.lr")
  SettingType type;
  SettingRange range;  // integer and number rows
  std::string doc;     // one line: the README's meaning column and the flag's help
  std::string flag;    // the CLI flag: the key with '-' for '_' unless given
  std::function<json::Value(const S&)> get;
  // Sets the field from a value of the row's type; throws std::invalid_argument saying what is
  // expected (a name that is not one of an enum's).
  std::function<void(S&, const json::Value&)> set;
  // Written only when the value differs from the struct's default: for keys added after configs
  // were stored, so that configs, checkpoints and results written before keep their exact bytes
  // (and their runs resume). Read either way.
  bool omit_default = false;

  std::string name() const { return section.empty() ? key : section + "." + key; }
  std::string flag_name() const {
    std::string name = flag.empty() ? key : flag;
    for (char& c : name) c = c == '_' ? '-' : c;
    return name;
  }
  // "" when `v` is a value this setting takes, else what is wrong ("must be >= 1, got 0").
  std::string problem(const json::Value& v) const {
    auto describe = [](const json::Value& x) {
      return x.is_number() || x.is_bool() ? json::dump(x) : std::string(json::kind_name(x.kind()));
    };
    switch (type) {
      case SettingType::integer:
        if (!v.is_integer()) return "expected an integer, got " + describe(v);
        break;
      case SettingType::number:
        if (!v.is_number()) return "expected a number, got " + describe(v);
        break;
      case SettingType::boolean:
        return v.is_bool() ? "" : "expected true or false, got " + describe(v);
      case SettingType::string:
        return v.is_string() ? "" : "expected a string, got " + describe(v);
    }
    if (!range.contains(v.as_double()))
      return "must be " + range.describe() + ", got " + json::dump(v);
    return "";
  }
};

// A path into the struct: path(&Config::training, &TrainingConfig::steps).
template <class... Members>
auto path(Members... members) {
  return [=](auto& s) -> auto& { return (s.*....*members); };
}

// A row of an integer, floating-point, bool or string field, its type taken from the field's.
template <class S, class Ref>
Setting<S> setting(std::string section, std::string key, Ref ref, SettingRange range,
                   std::string doc, std::string flag = "") {
  using T = std::remove_cvref_t<decltype(ref(std::declval<S&>()))>;
  constexpr SettingType type = std::same_as<T, bool>    ? SettingType::boolean
                               : std::integral<T>       ? SettingType::integer
                               : std::floating_point<T> ? SettingType::number
                                                        : SettingType::string;
  Setting<S> row{std::move(section),
                 std::move(key),
                 type,
                 range,
                 std::move(doc),
                 std::move(flag),
                 [ref](const S& s) { return json::Value(ref(s)); },
                 {}};
  row.set = [ref](S& s, const json::Value& v) {
    if constexpr (type == SettingType::boolean)
      ref(s) = v.as_bool();
    else if constexpr (type == SettingType::integer)
      ref(s) = static_cast<T>(v.as_int());
    else if constexpr (type == SettingType::number)
      ref(s) = v.as_double();
    else
      ref(s) = v.as_string();
  };
  return row;
}

// A row of an enum field written as its name: `parse` turns a name into the value (throwing
// std::invalid_argument that lists the names), `name_of` the value into its name.
template <class S, class Ref, class Parse, class Name>
Setting<S> choice(std::string section, std::string key, Ref ref, Parse parse, Name name_of,
                  std::string doc) {
  return Setting<S>{std::move(section),
                    std::move(key),
                    SettingType::string,
                    {},
                    std::move(doc),
                    "",
                    [=](const S& s) { return json::Value(std::string(name_of(ref(s)))); },
                    [=](S& s, const json::Value& v) { ref(s) = parse(v.as_string()); }};
}

template <class S>
using SettingsTable = std::vector<Setting<S>>;

// `row` marked omit_default (see Setting).
template <class S>
Setting<S> omitted_at_default(Setting<S> row) {
  row.omit_default = true;
  return row;
}

// The JSON object of one section's rows, in the table's order.
template <class S>
json::Value section_json(const SettingsTable<S>& table, const std::string& section, const S& s) {
  static const S defaults{};
  json::Value v = json::Value(json::Object{});
  for (const Setting<S>& row : table) {
    if (row.section != section) continue;
    json::Value value = row.get(s);
    if (row.omit_default && value == row.get(defaults)) continue;
    v[row.key] = std::move(value);
  }
  return v;
}

// The keys of one section, in the table's order.
template <class S>
std::vector<std::string> section_keys(const SettingsTable<S>& table, const std::string& section) {
  std::vector<std::string> keys;
  for (const Setting<S>& row : table)
    if (row.section == section) keys.push_back(row.key);
  return keys;
}

// Reads one section's JSON object into `s`: absent keys keep their values; an unknown key, a
// value of the wrong type or out of range is refused with "<source>: <section>.<key>: <what>".
template <class S>
void read_section(const SettingsTable<S>& table, const std::string& section,
                  const json::Value& object, S& s, const std::string& source) {
  auto fail = [&](const std::string& name, const std::string& what) {
    throw std::invalid_argument(source + ": " + name + ": " + what);
  };
  if (!object.is_object())
    fail(section, std::string("expected an object, got ") + json::kind_name(object.kind()));
  const std::vector<std::string> keys = section_keys(table, section);
  for (const auto& [key, value] : object.as_object()) {
    bool known = false;
    std::string names;
    for (const std::string& k : keys)
      known = known || k == key, names += (names.empty() ? "" : ", ") + k;
    if (!known) fail(section + "." + key, "unknown key (known: " + names + ")");
  }
  for (const Setting<S>& row : table) {
    const json::Value* v = row.section == section ? object.find(row.key) : nullptr;
    if (!v) continue;
    if (std::string problem = row.problem(*v); !problem.empty()) fail(row.name(), problem);
    try {
      row.set(s, *v);
    } catch (const std::exception& e) {
      fail(row.name(), e.what());
    }
  }
}

// Every row's range and type checked on the values in `s`; throws "<section>.<key>: <what>".
template <class S>
void check_settings(const SettingsTable<S>& table, const S& s) {
  for (const Setting<S>& row : table)
    if (std::string problem = row.problem(row.get(s)); !problem.empty())
      throw std::invalid_argument(row.name() + ": " + problem);
}

}  // namespace dg
