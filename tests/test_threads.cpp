// Thread settings and the BLAS build check.
#include <doctest/doctest.h>

#include <stdexcept>

#include "tensor/threads.h"

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
