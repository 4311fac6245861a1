// Thread settings, the BLAS build check, and the rule that sizes the thread count to a run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/threads.h"
#include "train/lm/run_config.h"

TEST_CASE("the OpenMP build of OpenBLAS is linked") {
  CHECK(dg::blas_is_openmp_build());
  CHECK(dg::blas_parallel_mode() == "OpenMP");
}

TEST_CASE("thread counts parse strictly") {
  CHECK(dg::parse_threads("2", "--threads") == 2);
  CHECK_THROWS_WITH_AS(dg::parse_threads("0", "--threads"), doctest::Contains("--threads"),
                       std::invalid_argument);
  CHECK_THROWS(dg::parse_threads("two", "--threads"));
  CHECK_THROWS(dg::parse_threads("", "DEPTHGRAD_THREADS"));
  CHECK(dg::physical_cores() >= 1);
}

TEST_CASE(
    "with no thread count chosen, a run gets one thread per GFLOP of a step, up to the cores") {
  const int cores = dg::physical_cores();
  CHECK(dg::threads_for_work(0) == 1);
  CHECK(dg::threads_for_work(-1) == 1);
  CHECK(dg::threads_for_work(std::nan("")) == 1);
  CHECK(dg::threads_for_work(0.99e9) == 1);
  CHECK(dg::threads_for_work(1e9) == 1);
  CHECK(dg::threads_for_work(2.5e9) == std::min(2, cores));
  CHECK(dg::threads_for_work(1e18) == cores);
  // The presets: 6 · parameters · batch · seq_len. micro trains on one thread, small on every core.
  const dg::RunConfig micro = dg::run_preset("micro"), small = dg::run_preset("small");
  CHECK(dg::estimated_step_flops(micro) == 6.0 * 140096 * 4 * 64);
  CHECK(dg::threads_for_work(dg::estimated_step_flops(micro)) == 1);
  CHECK(dg::threads_for_work(dg::estimated_step_flops(small)) == std::min(85, cores));
}

TEST_CASE("the environment's thread count: DEPTHGRAD_THREADS, else OMP_NUM_THREADS's first entry") {
  // Restores both variables as they were (ctest sets DEPTHGRAD_THREADS for this file).
  struct Saved {
    std::string name, value;
    bool set;
  };
  std::vector<Saved> saved;
  for (const char* name : {"DEPTHGRAD_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    saved.push_back({name, v ? v : "", v != nullptr});
  }
  ::unsetenv("DEPTHGRAD_THREADS");
  ::unsetenv("OMP_NUM_THREADS");
  CHECK(dg::threads_from_env() == 0);
  ::setenv("OMP_NUM_THREADS", "3,2", 1);
  CHECK(dg::threads_from_env() == 3);
  ::setenv("DEPTHGRAD_THREADS", "2", 1);
  CHECK(dg::threads_from_env() == 2);
  ::setenv("DEPTHGRAD_THREADS", "lots", 1);
  CHECK_THROWS_WITH(dg::threads_from_env(), doctest::Contains("DEPTHGRAD_THREADS"));
  for (const Saved& s : saved)
    if (s.set)
      ::setenv(s.name.c_str(), s.value.c_str(), 1);
    else
      ::unsetenv(s.name.c_str());
}
