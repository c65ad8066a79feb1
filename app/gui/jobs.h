// Background jobs shared by several views: simulating policies on the open trace and appending
// the runs to it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "app/gui/app_state.h"

namespace kvs {

// Simulates the policy specs ("name[:key=value,...]") at `budget` over the open trace on the
// engine worker, appends the runs to the trace file (atomically) and reopens it; then calls
// on_done on the UI thread. Errors go to the status line / modal.
void submit_simulation(AppState& app, const std::vector<std::string>& specs, int budget,
                       std::function<void()> on_done = {});

}  // namespace kvs
