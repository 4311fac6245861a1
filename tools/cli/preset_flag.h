// The --preset flag of train, reproduce and evolve: one named size from train/lm/run_config.h's
// preset table (micro, mini, small, base), under every flag given explicitly. The help text of
// the presets is generated from that table, so the numbers are typed once. It does not choose
// steps, schedules or learning rates: a preset is sizes (model and batch) only.
#pragma once
#include <string>

#include "tools/cli/flags.h"
#include "train/lm/run_config.h"

namespace dg::cli {

// --preset NAME
Flags& add_preset_flag(Flags& f);
// "presets (--preset NAME; ...):\n  micro ...\n" for a command's summary.
std::string preset_help_text();
// With --preset given: applies the preset to `config` (model sizes, batch, config.preset) and
// returns true; throws UsageError naming --preset for an unknown name. Without it: false.
bool apply_preset_flag(const Flags& f, RunConfig& config);

}  // namespace dg::cli
