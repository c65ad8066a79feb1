// Ctrl-C / SIGTERM as a request to stop a long command: while a StopSignals lives they set a flag
// that the command polls (at the next prefill layer or decode step) instead of killing the
// process, so it can end cleanly and say what it kept; the default handling returns after.
#pragma once

namespace kvs {

class StopSignals {
 public:
  StopSignals();   // routes SIGINT and SIGTERM to the flag
  ~StopSignals();  // restores their default handling
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received while one lived (SIGINT or SIGTERM), 0 = none.
  static int received();
};

}  // namespace kvs
