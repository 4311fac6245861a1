// The process group a program runs in: over MPI when the program is built with the MPI component
// and started by a launcher (mpirun, srun), else the group of one. This is the only interface to
// MPI (train/data_parallel.h's Collectives); MPI runs with MPI_THREAD_FUNNELED: only the main
// thread calls it, and never inside an OpenMP region.
// It does not decide what ranks compute (train/trainer.h) nor print anything but an abort line.
//
// Which World a program gets is decided when it is compiled, by DEPTHGRAD_WITH_MPI:
//   - without it, World is the group of one, defined in the core library (libdepthgrad.a, which
//     never references MPI): `dg::World world;` builds and runs in one process;
//   - with it, World is the MPI group, defined in libdepthgrad_mpi.a (linking Open MPI's C API).
//     The CMake target depthgrad::mpi (find_package(depthgrad COMPONENTS mpi)) and depthgrad-mpi.pc
//     carry the definition and the library together; in this tree, DG_MPI=ON does the same.
// The same source builds either way. The two Worlds live in different inline namespaces, so their
// symbols differ: no symbol is defined in both libraries, link order does not matter, and a program
// whose files disagree (one compiled with DEPTHGRAD_WITH_MPI, one without, passing a World between
// them) fails to link instead of silently mixing two definitions of one class. Compiling with the
// definition but not linking libdepthgrad_mpi.a fails to link too (dg::mpi_world::World missing).
#pragma once
#include <memory>
#include <string>

#include "train/data_parallel.h"

namespace dg {

#if DEPTHGRAD_WITH_MPI
inline namespace mpi_world {
#else
inline namespace single_world {
#endif

class World {
 public:
  // With MPI: initialises MPI when launched by an MPI launcher (environment set by mpirun or
  // srun); otherwise, and always without MPI, the group of one.
  World();
  ~World();  // MPI_Finalize when this World initialised MPI (call only when every rank gets here)
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  Collectives& collectives() { return *collectives_; }
  int rank() const { return collectives_->rank(); }
  int size() const { return collectives_->size(); }
  // Ends every rank of the job now (MPI_Abort): for an error only this rank saw. In one process,
  // std::exit(code).
  [[noreturn]] void abort(int code);
  // "Open MPI 4.1.4", or "none (built without MPI)" for the group of one
  static std::string library();

 private:
  std::unique_ptr<Collectives> collectives_;
#if DEPTHGRAD_WITH_MPI
  bool initialised_mpi_ = false;  // MPI_Init_thread was called here: the destructor finalises
#endif
};

}  // namespace mpi_world or single_world
}  // namespace dg
