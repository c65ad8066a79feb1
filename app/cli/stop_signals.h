// Ctrl-C / SIGTERM as a request to stop a long command: once a StopSignals is made they set a flag
// that the command polls (at the next prefill layer or decode step) instead of killing the
// process, so it can end cleanly and say what it kept. The routing stays until the process
// exits: a signal that lands after the command committed its result (between its end and the
// exit) must not kill it, or its exit status would say "stopped" over a trace it changed.
#pragma once

namespace kvs {

class StopSignals {
 public:
  StopSignals();  // routes SIGINT and SIGTERM to the flag (and clears it)
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received since one was made (SIGINT or SIGTERM), 0 = none.
  static int received();
};

}  // namespace kvs
