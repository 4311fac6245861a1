// Stopping a long run cleanly: SIGINT and SIGTERM only set a flag (a second one ends the process
// at once, the default action), and the training loops of train, reproduce and evolve look at it
// at each step boundary, where stop_if_requested() throws Interrupted. Whoever catches it saves
// what it needs (a checkpoint, a state file), says how to resume and exits 128 + the signal.
// It does not save anything itself and installs no handler unless asked (the library never does).
#pragma once
#include <stdexcept>
#include <string>

namespace dg {

// SIGINT and SIGTERM set the stop request from now on (the CLI's long commands call it).
void install_stop_handlers();
// The signal that asked for a stop, or 0.
int stop_signal();
// What the handler does: note `signal` (tests call it to simulate Ctrl-C).
void request_stop(int signal);
void clear_stop_request();

struct Interrupted : std::runtime_error {
  Interrupted(int signal, const std::string& what) : std::runtime_error(what), signal(signal) {}
  int signal;
  int exit_code() const { return 128 + signal; }  // 130 for SIGINT, 143 for SIGTERM
  const char* signal_name() const;
};

// Throws Interrupted when a stop was requested; `where` says at which point ("after step 12").
void stop_if_requested(const std::string& where);

}  // namespace dg
