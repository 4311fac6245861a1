// The process group a command runs in: over MPI when the program was built with it (DG_MPI) and
// started by a launcher (mpirun, srun), else the group of one. This is the only interface to MPI
// (train/data_parallel.h's Collectives); MPI runs with MPI_THREAD_FUNNELED: only the main thread
// calls it, and never inside an OpenMP region.
// It does not decide what ranks compute (train/trainer.h) nor print anything but an abort line.
#pragma once
#include <memory>
#include <string>

#include "train/data_parallel.h"

namespace dg {

class World {
 public:
  // Initialises MPI when launched by an MPI launcher (environment set by mpirun or srun).
  World();
  ~World();  // MPI_Finalize when this World initialised MPI (call only when every rank gets here)
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  Collectives& collectives() { return *collectives_; }
  int rank() const { return collectives_->rank(); }
  int size() const { return collectives_->size(); }
  // Ends every rank of the job now (MPI_Abort): for an error only this rank saw.
  [[noreturn]] void abort(int code);
  // "Open MPI 4.1.4" or "none (built without MPI)"
  static std::string library();

 private:
  std::unique_ptr<Collectives> collectives_;
  bool initialised_mpi_ = false;
};

}  // namespace dg
