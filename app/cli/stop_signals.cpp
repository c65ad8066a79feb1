// StopSignals: a sig_atomic_t flag set by the handler (stop_signals.h).
#include "app/cli/stop_signals.h"

#include <csignal>

namespace kvs {
namespace {

volatile std::sig_atomic_t g_received = 0;

void on_signal(int sig) { g_received = sig; }

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

int StopSignals::received() { return g_received; }

}  // namespace kvs
