// Live re-runs of policies on a trace's model, appended to the trace (`kvscope rerun`), with
// progress and cancellation for the desktop app.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "app/cli/commands.h"

namespace kvs {

// Where a re-run stands: run `index` of `count` (the full-cache reference first, named
// "reference", then each policy's run), in its prefill (`done` of `total` layers begun, total of
// total once the prompt is through) or its decode (`done` of `total` steps finished).
struct RerunProgress {
  std::string run;
  int index = 0, count = 0;
  bool decode = false;
  int done = 0, total = 0;
};

struct RerunCallbacks {
  std::function<void(const RerunProgress&)> on_progress;
  std::function<bool()> cancelled;  // true = stop at the next layer or step; nothing is appended
};

// Takes the arguments of `kvscope rerun` (trace path, --policy..., --budget, --mode, ...); returns
// the runs it appended. Throws InputError on bad input or cancellation, leaving the trace as it was.
std::vector<RunData> rerun_trace(const ArgList& args, const RerunCallbacks& callbacks = {});

}  // namespace kvs
