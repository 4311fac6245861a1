// Op-family timing (see profile.h). Accumulators are per thread: the thread that runs the ops
// is the one that reads them (OpenMP workers never open timers).
#include "tensor/profile.h"

#include <chrono>

namespace dg {

namespace {
thread_local OpProfile t_profile;
thread_local int t_depth = 0;  // open timers on this thread
thread_local OpFamily t_family = OpFamily::other;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

const char* op_family_name(OpFamily family) {
  switch (family) {
    case OpFamily::matmul:
      return "matmul";
    case OpFamily::attention:
      return "attention";
    case OpFamily::norms:
      return "norms";
    case OpFamily::mixing:
      return "mixing";
    case OpFamily::optimizer:
      return "optimizer";
    case OpFamily::other:
      return "other";
  }
  return "?";
}

double OpProfile::total() const {
  double s = 0;
  for (double x : seconds) s += x;
  return s;
}

void set_op_profiling(bool on) {
  profile_detail::g_enabled = on;
  reset_op_profile();
}

void reset_op_profile() { t_profile = OpProfile{}; }
OpProfile op_profile() { return t_profile; }
OpFamily current_op_family() { return t_depth > 0 ? t_family : OpFamily::other; }

void ScopedOpTimer::start(OpFamily family) {
  active_ = true;
  if (t_depth++ > 0) return;  // nested: the outermost timer owns the time
  outermost_ = true;
  family_ = family;
  t_family = family;
  start_ns_ = now_ns();
}

void ScopedOpTimer::stop() {
  --t_depth;
  if (!outermost_) return;
  const int f = static_cast<int>(family_);
  t_profile.seconds[f] += static_cast<double>(now_ns() - start_ns_) * 1e-9;
  t_profile.calls[f] += 1;
}

}  // namespace dg
