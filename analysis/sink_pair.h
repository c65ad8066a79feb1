// Compare's one-click demo pair: a StreamingLLM run without sinks against one with sinks, of
// the same budget and the same kind (simulated with simulated, live with live of the same mode),
// so that the difference between them is the sinks alone.
#pragma once
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs {

struct SinkPair {
  int none = -1;   // index in the runs of the run without sinks (sinks = 0), or -1
  int with = -1;   // ... of the run with sinks, or -1
  int budget = 0;  // their budget
  std::string kind = "simulated";  // "simulated", or the live runs' mode ("forced", "free")
  bool complete() const { return none >= 0 && with >= 0; }
};

// The pair to show: a complete pair at `budget` (the last one in the run list: the highest
// indexes), else the last complete pair at any budget, else the simulated runs at `budget` that exist
// (none, one or neither; see sink_pair_missing_specs).
SinkPair find_sink_pair(const std::vector<RunData>& runs, int budget);

// The policy specs to simulate at pair.budget to complete an incomplete simulated pair.
std::vector<std::string> sink_pair_missing_specs(const SinkPair& pair);

// The kind a run pairs by: "simulated", or a live run's mode.
std::string run_kind(const RunData& run);

}  // namespace kvs
