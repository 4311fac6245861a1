// The generation benchmark (see bench_generate.h).
#include "tools/attnres/bench_generate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include "train/lm/generate.h"

namespace dg {

double measure_read_bandwidth_gbs(size_t bytes, int passes) {
  const size_t n = bytes / sizeof(float);
  std::unique_ptr<float[]> buffer(new float[n]);
  for (size_t i = 0; i < n; ++i) buffer[i] = float(i & 1023) * 1e-3f;  // every page touched
  double best_seconds = 1e300;
  volatile float sink = 0;  // keeps the sums alive
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    // Eight independent sums so the loop is bound by loads, not by one add chain.
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float* p = buffer.get();
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
    for (; i < n; ++i) acc[0] += p[i];
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sink = sink + acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    best_seconds = std::min(best_seconds, seconds);
  }
  return double(n * sizeof(float)) / best_seconds / 1e9;
}

int64_t last_level_cache_bytes() {
  namespace fs = std::filesystem;
  int64_t largest = 0;
  std::error_code ec;
  const fs::path base = "/sys/devices/system/cpu/cpu0/cache";
  if (!fs::is_directory(base, ec)) {  // no sysfs (some VMs): what the C library reports
    for (int name : {_SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL4_CACHE_SIZE})
      largest = std::max<int64_t>(largest, sysconf(name));
    return largest;
  }
  for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
    std::ifstream in(e.path() / "size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    int64_t value = 0;
    size_t used = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      continue;
    }
    const char unit = used < text.size() ? text[used] : ' ';
    if (unit == 'K') value <<= 10;
    if (unit == 'M') value <<= 20;
    largest = std::max(largest, value);
  }
  return largest;
}

GenerateBenchRow bench_generation(const BenchSpec& spec, double bandwidth_gbs, int repeats) {
  const MicroLMConfig& c = spec.run.model;
  GenerateBenchRow row;
  row.config = spec.name;
  {
    MicroLM model(c);
    row.parameters = model.parameter_count();
    row.weight_bytes = matmul_parameters(model) * int64_t(sizeof(float));
  }
  row.tokens = c.seq_len - 1;  // the prompt's one id plus these fill exactly one context
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) rates.push_back(time_decode(c, row.tokens).tokens_per_second);
  std::sort(rates.begin(), rates.end());
  row.tokens_per_second = rates[rates.size() / 2];
  row.bound_tokens_per_second = bandwidth_gbs * 1e9 / double(row.weight_bytes);
  row.fraction_of_bound = row.tokens_per_second / row.bound_tokens_per_second;
  const int64_t llc = last_level_cache_bytes();
  row.weights_fit_in_cache = llc > 0 && row.weight_bytes < llc;
  return row;
}

std::string generate_bench_table(const std::vector<GenerateBenchRow>& rows, double bandwidth_gbs) {
  std::string out = fmt::format(
      "generation, 1 context of greedy decoding with the K/V cache; bound = {:.1f} GB/s measured "
      "read bandwidth / matmul weight bytes\n",
      bandwidth_gbs);
  out += fmt::format("{:<7} {:>11} {:>10} {:>7} {:>12} {:>12} {:>9}\n", "config", "parameters",
                     "weights MB", "tokens", "tokens/s", "bound tok/s", "of bound");
  for (const GenerateBenchRow& r : rows)
    out += fmt::format("{:<7} {:>11} {:>10.2f} {:>7} {:>12.0f} {:>12.0f} {:>8.0f}%{}\n", r.config,
                       r.parameters, double(r.weight_bytes) / 1e6, r.tokens, r.tokens_per_second,
                       r.bound_tokens_per_second, 100 * r.fraction_of_bound,
                       r.weights_fit_in_cache ? "  (weights fit in the last-level cache)" : "");
  return out;
}

json::Value generate_bench_json(const std::vector<GenerateBenchRow>& rows, double bandwidth_gbs) {
  json::Value v;
  v["read_bandwidth_gbs"] = bandwidth_gbs;
  v["last_level_cache_bytes"] = last_level_cache_bytes();
  json::Array list;
  for (const GenerateBenchRow& r : rows) {
    json::Value x;
    x["config"] = r.config;
    x["parameters"] = r.parameters;
    x["weight_bytes"] = r.weight_bytes;
    x["tokens"] = r.tokens;
    x["tokens_per_second"] = r.tokens_per_second;
    x["bound_tokens_per_second"] = r.bound_tokens_per_second;
    x["fraction_of_bound"] = r.fraction_of_bound;
    x["weights_fit_in_cache"] = r.weights_fit_in_cache;
    list.push_back(std::move(x));
  }
  v["generation"] = json::Value(std::move(list));
  return v;
}

}  // namespace dg
