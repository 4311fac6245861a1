// The shared --preset flag (see preset_flag.h).
#include "tools/cli/preset_flag.h"

#include <fmt/format.h>

#include <stdexcept>

namespace dg::cli {

Flags& add_preset_flag(Flags& f) {
  std::string names;
  for (const std::string& n : run_preset_names()) names += (names.empty() ? "" : " | ") + n;
  return f.add("preset", "",
               names + ": named sizes (listed above); flags given explicitly override them");
}

std::string preset_help_text() {
  return "presets (--preset NAME sets the model sizes and the batch listed here; every other "
         "setting keeps\nthe command's default, and a size flag given explicitly wins):\n" +
         run_preset_help();
}

bool apply_preset_flag(const Flags& f, RunConfig& config) {
  if (!f.given("preset")) return false;
  try {
    apply_run_preset(config, f.get("preset"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--preset: {}", e.what()));
  }
  return true;
}

}  // namespace dg::cli
