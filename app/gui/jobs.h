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
// on_done on the UI thread. Errors go to the status line / modal. Specs resolve as in `kvscope
// simulate`: OmniKV without filters= gets the optimizer's layers on the trace's similarity, and
// KVzip, when the trace has no repeat-pass scores, has them computed first on the trace's model
// (or on `model_path` when that file is gone; it must have the trace's shape).
void submit_simulation(AppState& app, const std::vector<std::string>& specs, int budget,
                       std::function<void()> on_done = {}, const std::string& model_path = "");

// Policy caveats ("run name: ...") as the end of a status-line message: ". Note: ..." each.
std::string caveat_text(const std::vector<std::string>& caveats);

}  // namespace kvs
