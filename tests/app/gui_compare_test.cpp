// Compare's one-click StreamingLLM pair (no GUI needed): only runs of one budget and one kind pair
// up (simulated with simulated, live with live of the same mode), the pair at the button's budget
// first, else the most recent; what is missing is simulated at the button's budget.
#include <gtest/gtest.h>

#include "analysis/sink_pair.h"

namespace kvs {
namespace {

RunData streaming(int sinks, int budget, const std::string& mode = "") {
  RunData r;
  r.policy = "streamingllm";
  r.budget = budget;
  r.params_json = "{\"sinks\":" + std::to_string(sinks) + ",\"recent\":" + std::to_string(budget - sinks) + "}";
  r.name = std::string("streamingllm") + (sinks ? "" : "_sinks0") + "_b" + std::to_string(budget) + (mode.empty() ? "" : "_" + mode);
  if (!mode.empty()) r.eviction = "real", r.mode = mode;
  return r;
}

RunData other(const std::string& policy, int budget) {
  RunData r;
  r.policy = policy;
  r.budget = budget;
  r.name = policy + "_b" + std::to_string(budget);
  return r;
}

// The audit's case: the last run of each kind was sinks0 at budget 10 and sinks at 16; they are
// not a pair. Neither budget is complete, so the button's budget (16 here) gets the missing run.
TEST(SinkPair, RunsOfDifferentBudgetsDoNotPair) {
  const std::vector<RunData> runs = {streaming(4, 16), other("h2o", 16), streaming(0, 10)};
  const SinkPair p = find_sink_pair(runs, 16);
  EXPECT_FALSE(p.complete());
  EXPECT_EQ(p.with, 0);
  EXPECT_EQ(p.none, -1);
  EXPECT_EQ(p.budget, 16);
  EXPECT_EQ(sink_pair_missing_specs(p), std::vector<std::string>{"streamingllm:sinks=0"});
  // At budget 10 the sinks run is the one missing.
  const SinkPair q = find_sink_pair(runs, 10);
  EXPECT_FALSE(q.complete());
  EXPECT_EQ(q.none, 2);
  EXPECT_EQ(sink_pair_missing_specs(q), std::vector<std::string>{"streamingllm"});
  // Neither at budget 32: both.
  EXPECT_EQ(sink_pair_missing_specs(find_sink_pair(runs, 32)),
            (std::vector<std::string>{"streamingllm:sinks=0", "streamingllm"}));
}

TEST(SinkPair, SimulatedAndLiveRunsDoNotPair) {
  // A live free run without sinks and a simulated one with sinks, both at 32: no pair.
  std::vector<RunData> runs = {streaming(4, 32), streaming(0, 32, "free")};
  EXPECT_FALSE(find_sink_pair(runs, 32).complete());
  // Live forced and live free neither.
  runs = {streaming(4, 32, "forced"), streaming(0, 32, "free")};
  EXPECT_FALSE(find_sink_pair(runs, 32).complete());
  runs.push_back(streaming(4, 32, "free"));
  const SinkPair p = find_sink_pair(runs, 32);
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.none, 1);
  EXPECT_EQ(p.with, 2);
  EXPECT_EQ(p.kind, "free");
}

TEST(SinkPair, PrefersTheButtonsBudgetThenTheMostRecentPair) {
  // The screenshot trace: a simulated pair at 64 and a live free pair at 32.
  const std::vector<RunData> runs = {streaming(4, 64), streaming(0, 64), other("h2o", 64), streaming(0, 32, "free"),
                                     streaming(4, 32, "free")};
  SinkPair p = find_sink_pair(runs, 64);
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.none, 1);
  EXPECT_EQ(p.with, 0);
  EXPECT_EQ(p.budget, 64);
  EXPECT_EQ(p.kind, "simulated");
  // No pair at the button's budget (16): the most recent complete one, the live pair.
  p = find_sink_pair(runs, 16);
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.none, 3);
  EXPECT_EQ(p.with, 4);
  EXPECT_EQ(p.budget, 32);
  EXPECT_EQ(p.kind, "free");
  EXPECT_TRUE(sink_pair_missing_specs(p).empty());
}

TEST(SinkPair, NoStreamingRunsMeansSimulateBothAtTheBudget) {
  const SinkPair p = find_sink_pair({other("h2o", 16)}, 24);
  EXPECT_FALSE(p.complete());
  EXPECT_EQ(p.budget, 24);
  EXPECT_EQ(p.kind, "simulated");
  EXPECT_EQ(sink_pair_missing_specs(p).size(), 2u);
}

}  // namespace
}  // namespace kvs
