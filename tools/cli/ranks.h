// Running a command on every MPI rank (train, reproduce): errors every rank raises alike are
// printed once, by rank 0, and the job ends cleanly; an error only one rank saw is printed with
// the rank's number and ends the whole job at once (MPI_Abort) instead of leaving the other
// ranks waiting in a collective. It does not start MPI (train/dist/world.h does).
#pragma once
#include <functional>

#include "train/dist/world.h"

namespace dg::cli {

// body(agreed) runs the command; it sets `agreed` once every rank is known to run the same
// settings (from then on a UsageError is one every rank raises alike).
int run_on_every_rank(World& world, const char* command,
                      const std::function<int(bool& agreed)>& body);

}  // namespace dg::cli
