// One thread setting for OpenMP and OpenBLAS together, and the check that the OpenMP build of
// OpenBLAS is the one linked. The environment (DEPTHGRAD_THREADS, else OMP_NUM_THREADS) applies by
// itself on the first tensor allocation; an explicit set_threads wins. No thread pools of its own.
#pragma once
#include <string>

namespace dg {

// Physical cores of this machine (hyper-threads not counted); at least 1.
int physical_cores();
// Sets OpenMP's and OpenBLAS's thread counts to n (n >= 1). Wins over the environment, whenever
// it is called.
void set_threads(int n);
// The thread count set last (applying the environment first if nothing was set yet).
int threads();
// Applies DEPTHGRAD_THREADS, else OMP_NUM_THREADS (its first entry), else physical cores. Throws
// naming the variable on a bad value.
void init_threads_from_env();
// init_threads_from_env() once, unless a thread count was already set: what the library calls on
// its first tensor allocation, so a program honours the environment without a call of its own.
// A bad value throws from that first allocation (and from each later one until fixed).
void apply_thread_environment_once();
// Parses a thread-count string from a flag or environment variable named `what`.
int parse_threads(const std::string& text, const std::string& what);
// "OpenMP" when the linked OpenBLAS runs its threads through OpenMP, else a warning text.
std::string blas_parallel_mode();
bool blas_is_openmp_build();
// OpenBLAS's configuration string (version, core).
std::string blas_config();

}  // namespace dg
