// Anomaly mode (PyTorch's detect_anomaly), part of the tape's public API: autograd/tape.h
// includes this header. The code is in autograd/tape_anomaly.cpp.
#pragma once
#include <string>

namespace dg {

// While a DetectAnomalyGuard(true) lives on this thread, every recorded node notes where it was
// made (its op, its inputs' shapes and the innermost CreationScope, which a Module's forward
// opens with its path), and each backward checks the gradients every node writes: the first
// non-finite value throws std::runtime_error naming the op whose backward produced it, the
// input, and where that op was made. Off by default; off, it costs one branch per node.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};
bool anomaly_enabled();

// A named place in the forward (a module's forward opens one with its dotted path) that anomaly
// mode records into each node made inside it. `describe(owner)` is called only in anomaly mode,
// when a node is recorded; owner must outlive the scope. Scopes nest (innermost wins).
class CreationScope {
 public:
  CreationScope(const void* owner, std::string (*describe)(const void* owner));
  ~CreationScope();
  CreationScope(const CreationScope&) = delete;
  CreationScope& operator=(const CreationScope&) = delete;
};

}  // namespace dg
