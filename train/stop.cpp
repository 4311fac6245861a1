// The stop request set by SIGINT/SIGTERM (see stop.h).
#include "train/stop.h"

#include <fmt/format.h>

#include <atomic>
#include <csignal>

namespace dg {

namespace {
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
  std::signal(signal, SIG_DFL);  // a second Ctrl-C ends the process without waiting
}
}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() { return g_stop_signal.load(); }
void request_stop(int signal) { g_stop_signal.store(signal); }
void clear_stop_request() { g_stop_signal.store(0); }

const char* Interrupted::signal_name() const {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

void stop_if_requested(const std::string& where) {
  if (const int signal = stop_signal())
    throw Interrupted(signal, fmt::format("stopped by {} {}",
                                          signal == SIGINT    ? "SIGINT"
                                          : signal == SIGTERM ? "SIGTERM"
                                                              : "a signal",
                                          where));
}

}  // namespace dg
