// Thread control: one setting drives OpenMP and OpenBLAS, so they never oversubscribe the cores.
#include "tensor/threads.h"

#include <cblas.h>
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

extern "C" {
int openblas_get_parallel(void);
char* openblas_get_config(void);
void openblas_set_num_threads(int);
}

namespace dg {

namespace {
int g_threads = 0;
}

int physical_cores() {
  // Count distinct (package, core) pairs from sysfs; fall back to hardware_concurrency.
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    if (!pkg || !core) break;
    std::string p, c;
    pkg >> p;
    core >> c;
    cores.insert({p, c});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

void set_threads(int n) {
  if (n < 1) throw std::invalid_argument(fmt::format("thread count must be >= 1, got {}", n));
  g_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int threads() {
  apply_thread_environment_once();
  return g_threads > 0 ? g_threads : physical_cores();
}

int parse_threads(const std::string& text, const std::string& what) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > 4096)
    throw std::invalid_argument(
        fmt::format("{}: expected a thread count from 1 to 4096, got '{}'", what, text));
  return static_cast<int>(v);
}

int threads_from_env() {
  const char* own = std::getenv("DEPTHGRAD_THREADS");
  if (own && *own) return parse_threads(own, "DEPTHGRAD_THREADS");
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp && *omp) {
    // OpenMP's form may list one count per nesting level ("4,2"): the outer one is ours.
    std::string first(omp);
    first = first.substr(0, first.find(','));
    return parse_threads(first, "OMP_NUM_THREADS");
  }
  return 0;
}

void init_threads_from_env() {
  const int n = threads_from_env();
  set_threads(n > 0 ? n : physical_cores());
}

int threads_for_work(double unit_flops) {
  if (!(unit_flops >= kFlopsPerThread)) return 1;  // NaN too
  const double wanted = std::floor(unit_flops / kFlopsPerThread);
  return static_cast<int>(std::min<double>(wanted, physical_cores()));
}

void apply_thread_environment_once() {
  // A function-local static: initialised once, thread-safely; if init throws it is retried.
  static const bool applied = g_threads > 0 || (init_threads_from_env(), true);
  (void)applied;
}

bool blas_is_openmp_build() { return openblas_get_parallel() == 2; }

std::string blas_parallel_mode() {
  switch (openblas_get_parallel()) {
    case 2:
      return "OpenMP";
    case 1:
      return "pthreads (wrong build: install libopenblas-openmp-dev; the pthread build "
             "fights OpenMP for cores)";
    default:
      return "sequential (single-threaded OpenBLAS build)";
  }
}

std::string blas_config() { return openblas_get_config(); }

}  // namespace dg
