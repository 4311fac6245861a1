// The ranges and type names of settings (see settings.h).
#include "train/settings.h"

#include <fmt/format.h>

namespace dg {

const char* setting_type_name(SettingType type) {
  switch (type) {
    case SettingType::integer:
      return "integer";
    case SettingType::number:
      return "number";
    case SettingType::boolean:
      return "boolean";
    case SettingType::string:
      return "string";
  }
  return "?";
}

bool SettingRange::contains(double x) const {
  return std::isfinite(x) && (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high);
}

std::string SettingRange::describe() const {
  std::string out;
  if (std::isfinite(low)) out = fmt::format("{} {}", low_open ? ">" : ">=", low);
  if (std::isfinite(high))
    out += fmt::format("{}{} {}", out.empty() ? "" : " and ", high_open ? "<" : "<=", high);
  return out.empty() ? "finite" : out;
}

}  // namespace dg
