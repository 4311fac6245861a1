// Opt-in wall-time accounting of training steps by op family (matmul, attention, norms, mixing,
// optimizer, other), for `depthgrad bench`. An op opens a ScopedOpTimer at the top of its
// forward; the tape records the family that is open when the op records its node and reopens it
// around that node's backward, so forward and backward land in the same family. Nested timers
// (an op that calls another op) count once, for the outermost family. When profiling is off a
// timer is one predictable branch. It does not sample, attribute work inside OpenMP threads to
// threads, or time anything on threads other than the one running the ops.
// Families by op: matmul = matmul, bmm, linear; attention = causal_attention, rope; norms =
// rms_norm, layer_norm; mixing = softmax and depth_mix (weighted sums over a set of sources);
// optimizer = zero_grad, clip_grad_norm, AdamW, SGD; other = embedding, cross_entropy,
// elementwise, reductions and shape ops.
#pragma once
#include <array>
#include <cstdint>

namespace dg {

enum class OpFamily : uint8_t { matmul, attention, norms, mixing, optimizer, other };
constexpr int kOpFamilies = 6;
const char* op_family_name(OpFamily family);

struct OpProfile {
  std::array<double, kOpFamilies> seconds{};  // wall time per family since the last reset
  std::array<int64_t, kOpFamilies> calls{};   // outermost timers closed per family
  double total() const;
};

namespace profile_detail {
inline bool g_enabled = false;
}  // namespace profile_detail

void set_op_profiling(bool on);  // also resets the accumulators
inline bool op_profiling() { return profile_detail::g_enabled; }
void reset_op_profile();
OpProfile op_profile();
// The family of the outermost open timer (OpFamily::other when none is open): what the tape
// stores with a node so its backward is timed under the same family.
OpFamily current_op_family();

class ScopedOpTimer {
 public:
  explicit ScopedOpTimer(OpFamily family) {
    if (profile_detail::g_enabled) start(family);
  }
  ~ScopedOpTimer() {
    if (active_) stop();
  }
  ScopedOpTimer(const ScopedOpTimer&) = delete;
  ScopedOpTimer& operator=(const ScopedOpTimer&) = delete;

 private:
  void start(OpFamily family);
  void stop();
  bool active_ = false;     // opened while profiling was on
  bool outermost_ = false;  // owns the time (no timer was open when it started)
  OpFamily family_ = OpFamily::other;
  int64_t start_ns_ = 0;
};

}  // namespace dg
