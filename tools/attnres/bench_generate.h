// The generation benchmark behind `depthgrad bench --generate`: greedy decoding speed with the
// K/V cache (train/lm/generate.h) for the bench configs (micro, small, base), set against the bound
// a decoder cannot beat when it reads every matmul weight once per token from main memory.
// The bandwidth is measured here (a one-thread streaming read of a buffer far larger than the
// caches); nothing is taken from a data sheet. It does not time prompts or sampling filters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/attnres/bench.h"

namespace dg {

// Best-of-`passes` one-thread read bandwidth in GB/s (1e9 bytes/s): sums a `bytes`-long float
// buffer (touched first, so page faults are not timed) with independent accumulators.
double measure_read_bandwidth_gbs(size_t bytes = size_t(512) << 20, int passes = 5);

struct GenerateBenchRow {
  std::string config;
  int64_t parameters = 0;              // all parameters
  int64_t weight_bytes = 0;            // float32 bytes of the matmul weights read per token
  int64_t tokens = 0;                  // generated ids timed (one context, no window moves)
  double tokens_per_second = 0;        // median of the repeats
  double bound_tokens_per_second = 0;  // bandwidth / weight_bytes
  double fraction_of_bound = 0;        // tokens_per_second / bound
  bool weights_fit_in_cache = false;   // weight_bytes below the last-level cache: bound is loose
};

// Times greedy decoding of spec.run.model from a one-id prompt to a full context
// (seq_len - 1 new ids), `repeats` times, at the current thread count.
GenerateBenchRow bench_generation(const BenchSpec& spec, double bandwidth_gbs, int repeats = 3);

// The last-level cache size in bytes: sysfs (largest cache index of cpu0), else sysconf, else 0.
int64_t last_level_cache_bytes();

std::string generate_bench_table(const std::vector<GenerateBenchRow>& rows, double bandwidth_gbs);
json::Value generate_bench_json(const std::vector<GenerateBenchRow>& rows, double bandwidth_gbs);

}  // namespace dg
