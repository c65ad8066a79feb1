// Finding the StreamingLLM no-sinks / sinks pair among a trace's runs (sink_pair.h).
#include "analysis/sink_pair.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "analysis/lanes.h"

namespace kvs {

std::string run_kind(const RunData& run) {
  return run.eviction == "real" ? (run.mode.empty() ? std::string("live") : run.mode) : std::string("simulated");
}

SinkPair find_sink_pair(const std::vector<RunData>& runs, int budget) {
  // (budget, kind) -> the last run of each side; later runs replace earlier ones.
  std::map<std::pair<int, std::string>, SinkPair> groups;
  for (int i = 0; i < (int)runs.size(); ++i) {
    const RunData& r = runs[i];
    if (r.policy != "streamingllm") continue;
    SinkPair& g = groups[{r.budget, run_kind(r)}];
    g.budget = r.budget;
    g.kind = run_kind(r);
    (json_number(r.params_json, "sinks", 0) > 0 ? g.with : g.none) = i;
  }
  const SinkPair* best = nullptr;
  auto better = [&](const SinkPair& g) {  // at `budget` first, then the last in the run list
    if (!best) return true;
    const bool at = g.budget == budget, best_at = best->budget == budget;
    if (at != best_at) return at;
    return std::max(g.none, g.with) > std::max(best->none, best->with);
  };
  for (const auto& [key, g] : groups)
    if (g.complete() && better(g)) best = &g;
  if (best) return *best;
  SinkPair partial;
  partial.budget = budget;
  if (auto it = groups.find({budget, "simulated"}); it != groups.end()) partial = it->second;
  return partial;
}

std::vector<std::string> sink_pair_missing_specs(const SinkPair& pair) {
  std::vector<std::string> specs;
  if (pair.none < 0) specs.push_back("streamingllm:sinks=0");
  if (pair.with < 0) specs.push_back("streamingllm");
  return specs;
}

}  // namespace kvs
