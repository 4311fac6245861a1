// Commands still being built; each says so and exits non-zero rather than pretending.
#include <stdexcept>

#include "tools/cli/commands.h"

namespace dg::cli {
int cmd_evolve(int, char**, int) { throw std::runtime_error("evolve is not built yet"); }
int cmd_train(int, char**, int) { throw std::runtime_error("train is not built yet"); }
int cmd_eval(int, char**, int) { throw std::runtime_error("eval is not built yet"); }
int cmd_tokenize(int, char**, int) { throw std::runtime_error("tokenize is not built yet"); }
int cmd_bench(int, char**, int) { throw std::runtime_error("bench is not built yet"); }
}  // namespace dg::cli
