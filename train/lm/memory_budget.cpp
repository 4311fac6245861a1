// Memory estimates from a configuration and the machine's memory (see memory_budget.h).
#include "train/lm/memory_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dg {

MemoryEstimate estimate_memory(const MicroLMConfig& c, int64_t batch) {
  constexpr double kFloat = 4;
  MemoryEstimate m;
  const double params =
      micro_lm_parameter_count(c);  // nn/lm/micro_lm.h: shared layers + the mode's
  m.parameters = params * kFloat;
  if (batch <= 0) return m;
  m.gradients = params * kFloat;
  m.moments = 2 * params * kFloat;
  // Saved per layer for backward (approximate): the block's inputs, norms, q/k/v, attention
  // output, the feed-forward's hidden activations (and gate), the attention probabilities
  // [B, H, T, T], plus each reference mode's depth sources; then the logits, softmax and their
  // gradient [B, T, vocab]. The tape's own nodes are small next to these.
  const double tokens = static_cast<double>(batch) * static_cast<double>(c.seq_len);
  const double dim = static_cast<double>(c.dim), hidden = static_cast<double>(c.ffn_width());
  const double per_layer = tokens * (12 * dim + 4 * hidden) +
                           static_cast<double>(batch) * static_cast<double>(c.heads) *
                               static_cast<double>(c.seq_len) * static_cast<double>(c.seq_len) * 2;
  const double depth_sources = c.mode.info().family != ResidualFamily::plain
                                   ? tokens * dim * static_cast<double>(c.layers)
                                   : 0;
  m.activations = kFloat * (static_cast<double>(c.layers) * per_layer + depth_sources +
                            3 * tokens * static_cast<double>(c.vocab));
  return m;
}

namespace {
// The first number in a file (a cgroup limit), or 0 ("max", missing, unreadable).
uint64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word[0] < '0' || word[0] > '9') return 0;
  try {
    return std::stoull(word);
  } catch (const std::exception&) {
    return 0;
  }
}
}  // namespace

uint64_t machine_memory_bytes(std::string* source) {
  uint64_t total = 0;
  std::string from;
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
      if (line.rfind("MemTotal:", 0) != 0) continue;
      std::istringstream fields(line.substr(9));
      uint64_t kib = 0;
      if (fields >> kib) total = kib * 1024, from = "MemTotal";
      break;
    }
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t limit = read_limit(path);
    if (limit > 0 && (total == 0 || limit < total)) total = limit, from = "cgroup limit";
  }
  if (source) *source = from;
  return total;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) bytes /= 1024, ++unit;
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

void check_memory_fits(const MemoryEstimate& need, const std::string& what) {
  std::string source;
  const uint64_t have = machine_memory_bytes(&source);
  if (have == 0 || need.total() <= static_cast<double>(have)) return;
  const std::string parts =
      need.gradients > 0
          ? fmt::format("parameters {}, gradients {}, AdamW moments {}, activations {}",
                        format_bytes(need.parameters), format_bytes(need.gradients),
                        format_bytes(need.moments), format_bytes(need.activations))
          : fmt::format("parameters {}", format_bytes(need.parameters));
  throw std::runtime_error(fmt::format("{} needs about {} ({}) but this machine has {} ({})", what,
                                       format_bytes(need.total()), parts,
                                       format_bytes(static_cast<double>(have)), source));
}

}  // namespace dg
