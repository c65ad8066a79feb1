// Live re-runs of policies on a trace's model, appended to the trace (`kvscope rerun`), with
// progress and cancellation for the desktop app.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "app/cli/commands.h"
#include "app/cli/pass_progress.h"

namespace kvs {

struct RerunCallbacks {
  // Each pass in turn: "KVzip scoring" when a kvzip policy needs scores the trace lacks, the
  // full-cache "reference run", then each policy's run (its run name).
  PassReport on_progress;
  std::function<bool()> cancelled;  // true = stop at the next layer or step; nothing is appended
  // Each policy's caveat ("run name: ..."), before any pass: settings that reduce it to
  // something else on this prompt (Policy::caveat).
  std::function<void(const std::string&)> on_caveat;
};

// Takes the arguments of `kvscope rerun` (trace path, --policy..., --budget, --mode, ...); returns
// the runs it appended. Throws InputError on bad input or cancellation, leaving the trace as it was.
std::vector<RunData> rerun_trace(const ArgList& args, const RerunCallbacks& callbacks = {});

}  // namespace kvs
