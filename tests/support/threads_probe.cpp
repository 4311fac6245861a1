// A program built on the installed library that never calls set_threads itself (unless given a
// count): it makes one tensor and prints dg::threads() and OpenMP's count, so that
// tests/package_consumer.sh can check that DEPTHGRAD_THREADS and OMP_NUM_THREADS apply on first
// use, in that order, and that an explicit set_threads wins. Not a test of the thread kernels.
#include <depthgrad/depthgrad.h>
#include <omp.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  try {
    if (argc > 1) dg::set_threads(std::stoi(argv[1]));
    dg::Tensor x = dg::Tensor::zeros({4});
    std::printf("%d %d\n", dg::threads(), omp_get_max_threads());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "threads_probe: %s\n", e.what());
    return 1;
  }
}
