// World as the group of one process (see world.h): part of the core library, the World of every
// program compiled without DEPTHGRAD_WITH_MPI (the package's mpi component not asked for, or this
// tree configured with -DDG_MPI=OFF).
// It does not detect launchers: such a program started by mpirun runs N independent jobs.
#include <cstdlib>

#include "train/dist/world.h"

#if DEPTHGRAD_WITH_MPI
#error "train/dist/single_world.cpp defines the group of one: compile it without DEPTHGRAD_WITH_MPI"
#endif

namespace dg {
inline namespace single_world {

World::World() : collectives_(std::make_unique<SingleProcess>()) {}
World::~World() = default;
void World::abort(int code) { std::exit(code); }
std::string World::library() { return "none (built without MPI)"; }

}  // namespace single_world
}  // namespace dg
