// One thread setting for OpenMP and OpenBLAS together, the check that the OpenMP build of
// OpenBLAS is the one linked, and the rule that sizes the count to the work when nobody chose one.
// The environment (DEPTHGRAD_THREADS, else OMP_NUM_THREADS) applies by itself on the first tensor
// allocation; an explicit set_threads wins. No thread pools of its own.
#pragma once
#include <omp.h>

#include <cstdint>
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
// The count DEPTHGRAD_THREADS, else OMP_NUM_THREADS (its first entry) asks for; 0 when neither is
// set. Throws naming the variable on a bad value.
int threads_from_env();

// The thread count for work done in units of `unit_flops` floating-point operations each (for
// training: one step, about 6 · parameters · tokens) when the user chose none: one
// thread per kFlopsPerThread, at least 1, at most physical_cores(). Below about a GFLOP a step's
// ops are small enough that the kernels keep most of them on one thread anyway (kParallelGrain,
// kGemmParallelMinWork), and each extra thread only adds wake-ups to the few that do split: a
// 0.2 GFLOP step gets 1 thread, 5.7 up to 5, 86 every core. Only how many threads run depends on
// this, never a result's bits: a run with the chosen count is the same as one with --threads set to
// it.
constexpr double kFlopsPerThread = 1e9;
int threads_for_work(double unit_flops);
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

// Sets the calling thread's OpenMP thread count to 1 for a scope (when `needed`) and restores it:
// a per-thread setting, a store with no region. Libraries that thread through OpenMP then run on
// the calling thread: OpenBLAS's OpenMP build, and oneDNN, which also sizes its primitives by it.
class OneOmpThread {
 public:
  explicit OneOmpThread(bool needed = true) : outer_(needed ? omp_get_max_threads() : 1) {
    if (outer_ > 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (outer_ > 1) omp_set_num_threads(outer_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int outer_;
};

// body(i) for i in 0 .. n − 1: over the OpenMP threads (static schedule) when `parallel`, more
// than one thread is set and no region is running; else a plain loop on the calling thread, with
// no region at all. (`omp parallel for if (false)` still enters libgomp, which allocates and
// frees a team for the one thread, about a microsecond: a one-token decode step runs dozens of
// small kernels.) For loops whose every i has one owner, so the bits do not depend on which.
template <class F>
void parallel_for(int64_t n, bool parallel, const F& body) {
  if (parallel && n > 1 && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace dg
