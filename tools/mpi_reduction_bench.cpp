// mpi_reduction_bench: times the fixed-order gradient reduction (reduce-scatter in rank order +
// all-gather, train/data_parallel.h) against one MPI_Allreduce(MPI_SUM) on the same buffer, for
// flat gradients of the given sizes, and says whether the two agree bit for bit.
// Usage: mpirun -np N mpi_reduction_bench [elements ...]  (default: micro and small configs).
// It does not train anything; sizes are element counts of a float32 flat gradient.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tensor/threads.h"
#include "train/dist/world.h"

int main(int argc, char** argv) {
  dg::World world;
  dg::init_threads_from_env();  // DEPTHGRAD_THREADS per rank (OpenMP's default would oversubscribe)
  dg::Collectives& c = world.collectives();
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty())
    sizes = {112000, 1100000};  // about the micro (dim 64) and small (dim 128+) gradients
  if (world.rank() == 0)
    fmt::print("{} rank(s), {}; median of 20 after 3 warm-up\n{:>10} {:>16} {:>16} {:>16} {:>10}\n",
               world.size(), dg::World::library(), "elements", "fixed-order ms", "of it scatter ms",
               "MPI_Allreduce ms", "same bits");
  for (int64_t n : sizes) {
    std::vector<float> grad(n), a(n), b(n);
    uint32_t state = 12345u + 977u * static_cast<uint32_t>(world.rank());
    for (auto& x : grad) {
      state = state * 1664525u + 1013904223u;
      // full mantissas and mixed exponents, like gradients (sums of dyadic values would be exact)
      x = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 1.3371f *
          std::ldexp(1.0f, static_cast<int>(state & 15) - 8);
    }
    // Shards of equal size (the trainer cuts at norm-block boundaries; the cost is the same).
    std::vector<int64_t> bounds(world.size() + 1);
    for (int r = 0; r <= world.size(); ++r) bounds[r] = n * r / world.size();
    auto time_it = [&](auto&& fn) {
      std::vector<double> ms;
      for (int rep = 0; rep < 23; ++rep) {
        c.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      ms.erase(ms.begin(), ms.begin() + 3);
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const double fixed = time_it([&] {
      std::memcpy(a.data(), grad.data(), n * sizeof(float));
      c.reduce_scatter_in_rank_order(a.data(), bounds);
      c.all_gather(a.data(), bounds);
    });
    std::vector<float> fixed_result = a;
    const double scatter_only = time_it([&] {
      std::memcpy(a.data(), grad.data(), n * sizeof(float));
      c.reduce_scatter_in_rank_order(a.data(), bounds);
    });
    const double library = time_it([&] {
      std::memcpy(b.data(), grad.data(), n * sizeof(float));
      c.all_reduce_sum_any_order(b.data(), n);
    });
    const bool same = std::memcmp(fixed_result.data(), b.data(), n * sizeof(float)) == 0;
    if (world.rank() == 0)
      fmt::print("{:>10} {:>16.3f} {:>16.3f} {:>16.3f} {:>10}\n", n, fixed, scatter_only, library,
                 same ? "yes" : "no");
  }
  return 0;
}
