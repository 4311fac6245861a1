// Anomaly mode (PyTorch's detect_anomaly): while a DetectAnomalyGuard is on, record() notes where
// each node is made (describe_creation: the innermost CreationScope, which a module's forward
// opens, and the inputs' shapes), and after each node's backward the walk checks the gradients
// it wrote (check_gradients_finite): the first non-finite value throws, naming the op, the input
// and where the op was made. Off, each costs the core one branch. See tape.h for the contract.
#include <fmt/format.h>

#include <cmath>

#include "autograd/op_trace.h"
#include "autograd/tape_internal.h"

namespace dg {

thread_local constinit bool g_anomaly = false;

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(g_anomaly) { g_anomaly = enabled; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly = previous_; }
bool anomaly_enabled() { return g_anomaly; }

namespace {
struct ScopeEntry {
  const void* owner;
  std::string (*describe)(const void*);
};
// CreationScope's stack: pushed by every module forward (two pointers), read only in anomaly mode.
thread_local std::vector<ScopeEntry> g_scopes;
}  // namespace

CreationScope::CreationScope(const void* owner, std::string (*describe)(const void*)) {
  g_scopes.push_back(ScopeEntry{owner, describe});
}
CreationScope::~CreationScope() { g_scopes.pop_back(); }

std::string current_module_path() {
  return g_scopes.empty() ? std::string() : g_scopes.back().describe(g_scopes.back().owner);
}

std::string describe_creation(const std::vector<Tensor>& inputs) {
  std::string where =
      g_scopes.empty()
          ? std::string("outside any module's forward")
          : fmt::format("in module '{}'", g_scopes.back().describe(g_scopes.back().owner));
  std::string shapes;
  for (const Tensor& in : inputs) shapes += (shapes.empty() ? "" : ", ") + in.describe();
  return fmt::format("{} with inputs {}", where, shapes.empty() ? "(none)" : shapes);
}

namespace {
// The first non-finite element of t, or -1.
int64_t first_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return -1;
  const std::vector<double> v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return static_cast<int64_t>(i);
  return -1;
}
}  // namespace

void check_gradients_finite(const GraphNode& node, const Tensor& output) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor& in = node.inputs[k];
    if (!in.defined() || !in.impl()->grad.defined()) continue;
    const Tensor& g = in.impl()->grad;
    const int64_t at = first_non_finite(g);
    if (at < 0) continue;
    throw std::runtime_error(fmt::format(
        "anomaly: the backward of op '{}' returned a non-finite value ({}) at element {} of the "
        "gradient of its input {} ({}); the op was recorded {}; its output was {}",
        node.op, g.to_vector()[static_cast<size_t>(at)], at, k, in.describe(),
        node.made_at ? *node.made_at : std::string("outside anomaly mode (where is unknown)"),
        output.describe()));
  }
}

}  // namespace dg
