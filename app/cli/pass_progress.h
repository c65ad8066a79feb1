// Progress of commands that run the model several times: `rerun` (the full-cache reference, then
// each policy) and `record --policy` (the reference, KVzip's scoring pass, then the recorded run).
#pragma once
#include <functional>
#include <string>

#include "analysis/run_progress.h"

namespace kvs {

// Pass `index` of `count`, named `pass`, in its prefill (`done` of `total` layers begun; total of
// total once the prompt is through) or its decode (`done` of `total` steps finished).
struct PassProgress {
  std::string pass;
  int index = 0, count = 0;
  bool decode = false;
  int done = 0, total = 0;
};

using PassReport = std::function<void(const PassProgress&)>;

// A RunProgress that reports pass `index` of `count` named `pass` to `report` (nothing when it
// is empty) and stops when `cancelled` says so.
RunProgress pass_progress(const PassReport& report, const std::string& pass, int index, int count,
                          const std::function<bool()>& cancelled);

// One terminal line for it: "pass 2 of 3, h2o_b64: prefill, layer 5 of 30".
std::string describe(const PassProgress& p);

}  // namespace kvs
