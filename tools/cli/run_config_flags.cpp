// The run configuration's settings as flags (see run_config_flags.h).
#include "tools/cli/run_config_flags.h"

#include <fmt/format.h>

#include <algorithm>

namespace dg::cli {

namespace {
// A row's doc without Markdown: `code` -> code, [text](link) -> text.
std::string plain(const std::string& doc) {
  std::string out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const size_t close = doc.find("](", i);
    if (doc[i] == '[' && close != std::string::npos && doc.find(')', close) != std::string::npos) {
      out += doc.substr(i + 1, close - i - 1);
      i = doc.find(')', close);
    } else if (doc[i] != '`') {
      out += doc[i];
    }
  }
  return out;
}
}  // namespace

std::string setting_text(const Setting<RunConfig>& row, const RunConfig& config) {
  const json::Value v = row.get(config);
  return v.is_string() ? v.as_string() : json::dump(v);
}

Flags& add_run_config_flags(Flags& f, const std::vector<CommandDefaults>& defaults,
                            const std::vector<std::string>& names,
                            const std::map<std::string, std::string>& notes) {
  for (const Setting<RunConfig>& row : run_config_settings()) {
    const std::string flag = row.flag_name();
    if (!names.empty() && std::find(names.begin(), names.end(), flag) == names.end()) continue;
    std::string help = plain(row.doc), value = setting_text(row, defaults.at(0).config), each;
    for (const CommandDefaults& d : defaults) {
      each +=
          fmt::format("{}{}: {}", each.empty() ? "" : "; ", d.label, setting_text(row, d.config));
      if (setting_text(row, d.config) != value) value.clear();
    }
    const auto note = notes.find(flag);
    if (note != notes.end())
      help += " " + note->second;
    else if (value.empty())
      help += " (" + each + ")";
    if (row.type == SettingType::boolean)
      f.add_switch(flag, help, value == "true");
    else
      f.add(flag, value, help, row.range);
  }
  return f;
}

void apply_run_config_flags(const Flags& f, RunConfig& config) {
  for (const Setting<RunConfig>& row : run_config_settings()) {
    const std::string flag = row.flag_name();
    if (!f.declared(flag) || !f.given(flag)) continue;
    const json::Value v = row.type == SettingType::integer   ? json::Value(f.get_int(flag))
                          : row.type == SettingType::number  ? json::Value(f.get_double(flag))
                          : row.type == SettingType::boolean ? json::Value(f.get_bool(flag))
                                                             : json::Value(f.get(flag));
    std::string problem = row.problem(v);
    if (problem.empty()) try {
        row.set(config, v);
      } catch (const std::exception& e) {
        problem = e.what();
      }
    if (!problem.empty()) throw UsageError(fmt::format("--{}: {}", flag, problem));
  }
  // A precision this CPU cannot run is refused here, before any data is read.
  if (f.declared("precision") && f.given("precision")) parse_precision_flag(f.get("precision"));
}

MatmulPrecision parse_precision_flag(const std::string& text) {
  MatmulPrecision p = MatmulPrecision::float32;
  try {
    p = parse_precision(text, "--precision");
    check_precision_supported(p, "--precision");
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  return p;
}

}  // namespace dg::cli
