// Errors on several ranks (see ranks.h).
#include "tools/cli/ranks.h"

#include <fmt/core.h>

#include <cstdio>

#include "tools/cli/flags.h"

namespace dg::cli {

int run_on_every_rank(World& world, const char* command,
                      const std::function<int(bool& agreed)>& body) {
  bool agreed = false;
  try {
    return body(agreed);
  } catch (const CollectiveError&) {
    if (world.rank() == 0) throw;  // every rank refuses alike: rank 0 says why
    return 1;
  } catch (const UsageError& e) {
    if (agreed || world.size() == 1) {
      if (world.rank() == 0) throw;
      return 2;
    }
    fmt::print(stderr, "depthgrad {}: rank {} of {}: error: {}\n", command, world.rank(),
               world.size(), e.what());
    std::fflush(stderr);
    world.abort(2);
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    fmt::print(stderr, "depthgrad {}: rank {} of {}: error: {}\n", command, world.rank(),
               world.size(), e.what());
    std::fflush(stderr);
    world.abort(1);
  }
}

}  // namespace dg::cli
