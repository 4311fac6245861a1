// World without MPI (configured with -DDG_MPI=OFF): always the group of one process.
// It does not detect launchers: a build without MPI started by mpirun runs N independent jobs.
#include <cstdlib>

#include "train/dist/world.h"

namespace dg {

World::World() : collectives_(std::make_unique<SingleProcess>()) {}
World::~World() = default;
void World::abort(int code) { std::exit(code); }
std::string World::library() { return "none (built without MPI)"; }

}  // namespace dg
