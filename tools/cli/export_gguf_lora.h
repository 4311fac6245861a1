// `depthgrad export --to gguf` with --base, --adapter, --merge-lora, --lora-adapter or --quant
// (tools/cli/export_gguf_lora.cpp): cmd_export hands its parsed flags here.
#pragma once
#include "tools/cli/flags.h"

namespace dg::cli {

// Writes the GGUF the flags ask for; throws UsageError for a combination that says nothing
// clear (both --merge-lora and --lora-adapter, either without --adapter, --adapter alone, --base
// with --checkpoint) and for an existing --output without --overwrite.
int export_gguf_command(const Flags& f);

}  // namespace dg::cli
