// Commands still being built; each says so and exits non-zero rather than pretending.
#include <stdexcept>

#include "tools/cli/commands.h"

namespace dg::cli {
int cmd_bench(int, char**, int) { throw std::runtime_error("bench is not built yet"); }
}  // namespace dg::cli
