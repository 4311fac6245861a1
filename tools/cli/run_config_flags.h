// The run configuration's settings as flags: one flag per row of run_config_settings()
// (train/lm/run_config.h), named from its key (training.weight_decay -> --weight-decay, unless the
// row names another: --block-size), with the row's doc as its help line, the row's range checked
// when parsed, and as default the value in the config a command starts from. It declares no
// setting of its own: a row added to the table is a flag of every command that takes them all.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tools/cli/flags.h"
#include "train/lm/run_config.h"

namespace dg::cli {

// The config a command starts from, under a label when a command has several ("parity", "paired").
struct CommandDefaults {
  std::string label;
  RunConfig config;
};

// Declares the flags of the settings named in `names` (flag names, in the table's order; empty =
// every setting). The default shown is the setting's value in `defaults`, or one per label
// ("(parity: 30; paired: 1000)") when they differ; `notes` adds words to a flag's help, and a
// note that names a default ("(default: heads)") is shown instead of the value.
Flags& add_run_config_flags(Flags& f, const std::vector<CommandDefaults>& defaults,
                            const std::vector<std::string>& names = {},
                            const std::map<std::string, std::string>& notes = {});

// Sets the setting of every run-config flag given (declared flags only); a value the setting
// refuses is a UsageError naming the flag.
void apply_run_config_flags(const Flags& f, RunConfig& config);

// The setting's value as a flag's text: 0.0006, cosine, true.
std::string setting_text(const Setting<RunConfig>& row, const RunConfig& config);

// The one reading of a --precision value (train, reproduce and evolve through the settings table
// above, bench for each of its comma-separated values): float32 or bf16, refused as a UsageError
// naming the flag when it is neither or when this CPU cannot run it (check_precision_supported,
// tensor/gemm_kernels.h).
MatmulPrecision parse_precision_flag(const std::string& text);

}  // namespace dg::cli
