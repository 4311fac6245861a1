// How much memory a model or a training run will need, worked out from its configuration before
// anything is allocated, and the machine's memory (MemTotal or the cgroup limit) to compare with.
// An estimate (parameters exact, activations and tape approximate), not an allocator or a limiter.
#pragma once
#include <cstdint>
#include <string>

#include "nn/lm/micro_lm.h"

namespace dg {

struct MemoryEstimate {
  double parameters = 0;   // bytes of float32 weights
  double gradients = 0;    // training: one gradient per weight
  double moments = 0;      // training: AdamW's two moments
  double activations = 0;  // training: activations and tape of one batch × seq_len step
  double total() const { return parameters + gradients + moments + activations; }
};

// Inference (batch 0: weights only) or training of `batch` sequences of config.seq_len.
MemoryEstimate estimate_memory(const MicroLMConfig& config, int64_t batch);

// Bytes this process may use: the smaller of /proc/meminfo MemTotal and the cgroup memory limit
// (v2 memory.max or v1 memory.limit_in_bytes); 0 when neither can be read. `source` says which.
uint64_t machine_memory_bytes(std::string* source = nullptr);

// Throws std::runtime_error when the estimate exceeds the machine's memory, naming `what`, the
// need (with its parts) and the memory: "training d=... needs about 1.2 TiB (...) but this
// machine has 15.6 GiB (MemTotal)". Does nothing when the machine's memory is unknown.
void check_memory_fits(const MemoryEstimate& need, const std::string& what);

// "1.5 GiB", "312.0 MiB", "12 B".
std::string format_bytes(double bytes);

}  // namespace dg
