// Live re-runs of policies on a trace's model, appended to the trace (`kvscope rerun`), with
// progress and cancellation for the desktop app.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "app/cli/commands.h"

namespace kvs {

struct RerunCallbacks {
  std::function<void(const std::string& run, int step, int total)> on_step;
  std::function<bool()> cancelled;  // true = stop; nothing is appended then
};

// Takes the arguments of `kvscope rerun` (trace path, --policy..., --budget, --mode, ...); returns
// the runs it appended. Throws InputError on bad input or cancellation, leaving the trace as it was.
std::vector<RunData> rerun_trace(const ArgList& args, const RerunCallbacks& callbacks = {});

}  // namespace kvs
