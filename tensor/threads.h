// One thread setting for OpenMP and OpenBLAS together, and the check that the OpenMP build of
// OpenBLAS is the one linked. Does not create thread pools of its own: OpenMP's is the only one.
#pragma once
#include <string>

namespace dg {

// Physical cores of this machine (hyper-threads not counted); at least 1.
int physical_cores();
// Sets OpenMP's and OpenBLAS's thread counts to n (n >= 1).
void set_threads(int n);
// The thread count set last (or the default).
int threads();
// Reads DEPTHGRAD_THREADS (default: physical cores) and applies it. Throws on a bad value.
void init_threads_from_env();
// Parses a thread-count string from a flag or environment variable named `what`.
int parse_threads(const std::string& text, const std::string& what);
// "OpenMP" when the linked OpenBLAS runs its threads through OpenMP, else a warning text.
std::string blas_parallel_mode();
bool blas_is_openmp_build();
// OpenBLAS's configuration string (version, core).
std::string blas_config();

}  // namespace dg
