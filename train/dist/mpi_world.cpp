// World over MPI (see world.h; libdepthgrad_mpi.a, compiled with DEPTHGRAD_WITH_MPI):
// MPI_Init_thread(FUNNELED) when started by a launcher, and the Collectives in plain MPI calls. The
// gradient reduction is a gather-to-owner reduce-scatter (MPI_Alltoallv moves the bytes, this file
// adds them in rank order) and an all-gather (MPI_Allgatherv): MPI only moves data, so its
// algorithm choice cannot change a bit. It does not use MPI_Allreduce for anything but the
// comparison all_reduce_sum_any_order.
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "tensor/kernels_elementwise.h"
#include "train/dist/world.h"

#if !DEPTHGRAD_WITH_MPI
#error "train/dist/mpi_world.cpp defines the MPI World: compile it with DEPTHGRAD_WITH_MPI=1"
#endif

namespace dg {

namespace {
bool started_by_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

int count_of(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    throw std::length_error(fmt::format("MPI {}: {} elements do not fit an MPI count", what, n));
  return static_cast<int>(n);
}

class MpiCollectives final : public Collectives {
 public:
  MpiCollectives() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void reduce_scatter_in_rank_order(float* buffer, const std::vector<int64_t>& bounds) override {
    // Every rank sends shard o to its owner o; the owner receives the N copies of its shard in
    // rank order ([N, mine]) and adds them in that order.
    const int64_t mine = bounds[rank_ + 1] - bounds[rank_];
    counts_.resize(size_);
    displs_.resize(size_);
    recv_counts_.resize(size_);
    recv_displs_.resize(size_);
    for (int r = 0; r < size_; ++r) {
      counts_[r] = count_of(bounds[r + 1] - bounds[r], "reduce-scatter");
      displs_[r] = count_of(bounds[r], "reduce-scatter");
      recv_counts_[r] = count_of(mine, "reduce-scatter");
      recv_displs_[r] = count_of(mine * r, "reduce-scatter");
    }
    scratch_.resize(static_cast<size_t>(mine * size_));
    MPI_Alltoallv(buffer, counts_.data(), displs_.data(), MPI_FLOAT, scratch_.data(),
                  recv_counts_.data(), recv_displs_.data(), MPI_FLOAT, MPI_COMM_WORLD);
    float* out = buffer + bounds[rank_];
    const float* copies = scratch_.data();
    std::memcpy(out, copies, static_cast<size_t>(mine) * sizeof(float));
    for (int q = 1; q < size_; ++q) {
      const float* add = copies + q * mine;
#pragma omp parallel for simd schedule(static) if (parallel : mine > kParallelGrain)
      for (int64_t i = 0; i < mine; ++i) out[i] += add[i];
    }
  }

  void all_gather(float* buffer, const std::vector<int64_t>& bounds) override {
    shard_layout(bounds);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, counts_.data(), displs_.data(),
                   MPI_FLOAT, MPI_COMM_WORLD);
  }

  void gather_to_root(const float* mine, float* full, const std::vector<int64_t>& bounds) override {
    shard_layout(bounds);
    MPI_Gatherv(mine, counts_[rank_], MPI_FLOAT, full, counts_.data(), displs_.data(), MPI_FLOAT, 0,
                MPI_COMM_WORLD);
  }

  std::vector<double> all_gather(const std::vector<double>& mine) override {
    std::vector<int> counts(size_), displs(size_);
    const int n = count_of(static_cast<int64_t>(mine.size()), "all-gather");
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) displs[r] = count_of(total, "all-gather"), total += counts[r];
    std::vector<double> all(static_cast<size_t>(total));
    MPI_Allgatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    return all;
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    std::vector<int> counts(size_), displs(size_);
    const int n = count_of(static_cast<int64_t>(mine.size()), "all-gather");
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) displs[r] = count_of(total, "all-gather"), total += counts[r];
    std::string all(static_cast<size_t>(total), '\0');
    MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR,
                   MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(displs[r], counts[r]));
    return out;
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  // MPI_Ibarrier, tested every 20 ms (a blocking MPI call would spin a core meanwhile).
  bool barrier_within(double seconds) override {
    MPI_Request request;
    MPI_Ibarrier(MPI_COMM_WORLD, &request);
    const auto start = std::chrono::steady_clock::now();
    int done = 0;
    while (true) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return true;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
          seconds)
        return false;  // the caller ends the job (MPI_Abort)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void all_reduce_sum_any_order(float* buffer, int64_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, buffer, count_of(count, "all-reduce"), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }

  bool point_to_point() const override { return true; }
  int64_t start_send(const float* data, int64_t count, int to, int tag) override {
    const int64_t handle = new_request();
    MPI_Isend(data, count_of(count, "send"), MPI_FLOAT, to, tag, MPI_COMM_WORLD,
              &requests_[handle]);
    return handle;
  }
  int64_t start_receive(float* data, int64_t count, int from, int tag) override {
    const int64_t handle = new_request();
    MPI_Irecv(data, count_of(count, "receive"), MPI_FLOAT, from, tag, MPI_COMM_WORLD,
              &requests_[handle]);
    return handle;
  }
  bool done(int64_t handle) override {
    int complete = 0;
    MPI_Test(&requests_.at(static_cast<size_t>(handle)), &complete, MPI_STATUS_IGNORE);
    if (complete) free_requests_.push_back(handle);
    return complete != 0;
  }

 private:
  void shard_layout(const std::vector<int64_t>& bounds) {
    counts_.resize(size_);
    displs_.resize(size_);
    for (int r = 0; r < size_; ++r) {
      counts_[r] = count_of(bounds[r + 1] - bounds[r], "all-gather");
      displs_[r] = count_of(bounds[r], "all-gather");
    }
  }
  // A slot for a new request: one a completed request left, or a new one.
  int64_t new_request() {
    if (!free_requests_.empty()) {
      const int64_t handle = free_requests_.back();
      free_requests_.pop_back();
      return handle;
    }
    requests_.push_back(MPI_REQUEST_NULL);
    return static_cast<int64_t>(requests_.size()) - 1;
  }
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> requests_;  // the point-to-point messages', by handle
  std::vector<int64_t> free_requests_;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;  // reused: no allocation per step
  std::vector<float> scratch_;
};

// srun without an MPI plugin starts N processes that each see MPI as one: N independent runs.
std::runtime_error srun_without_pmi(const char* tasks) {
  return std::runtime_error(fmt::format(
      "started by srun with {} tasks but MPI sees 1 process: run srun --mpi=pmix (or pmi2)",
      tasks));
}
}  // namespace

inline namespace mpi_world {

World::World() {
  if (!started_by_launcher()) {
    // srun sets SLURM_STEP_NUM_TASKS in the tasks of its job step (sbatch sets no SLURM_STEP_*).
    const char* step_tasks = std::getenv("SLURM_STEP_NUM_TASKS");
    if (step_tasks && std::atoi(step_tasks) > 1) throw srun_without_pmi(step_tasks);
    collectives_ = std::make_unique<SingleProcess>();
    return;
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread failed");
  initialised_mpi_ = true;
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    initialised_mpi_ = false;
    throw std::runtime_error(
        "the MPI library does not provide MPI_THREAD_FUNNELED (needed with OpenMP threads)");
  }
  collectives_ = std::make_unique<MpiCollectives>();
  const char* slurm_tasks = std::getenv("SLURM_NTASKS");
  if (slurm_tasks && std::atoi(slurm_tasks) > 1 && collectives_->size() == 1)
    throw srun_without_pmi(slurm_tasks);
}

World::~World() {
  if (initialised_mpi_) MPI_Finalize();
}

void World::abort(int code) {
  if (initialised_mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

std::string World::library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string v(version, static_cast<size_t>(length));
  const size_t comma = v.find(',');
  return comma == std::string::npos ? v : v.substr(0, comma);
}

}  // namespace mpi_world
}  // namespace dg
