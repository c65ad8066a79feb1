// Positional policies (full, window, streamingllm, strided) driven by the simulator.
#include <gtest/gtest.h>

#include "analysis/policy_strided.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

TEST(Full, KeepsEverything) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 10, 5, 4, 1);
  auto p = policy("full", 0, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 5; ++s)
    for (int l = 0; l < 2; ++l)
      for (int g = 0; g < 2; ++g) EXPECT_EQ(kept_at(r, in, s, l, g), range(0, 10 + s + 1));
  EXPECT_EQ(r.name, "full");
  EXPECT_EQ(r.eviction, "simulated");
}

TEST(Window, KeepsTheLastBAndAttendsBPlusOne) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 10, 4, 4, 2);
  auto p = policy("window", 6, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 4; ++s) {
    const int q = 10 + s;
    EXPECT_EQ(kept_at(r, in, s, 0, 0), range(q - 6, q + 1));
  }
}

TEST(StreamingLlm, FourSinksAnd32RecentAtEveryStep) {
  const ModelShape shape = shape_of(3, 4, 2);
  const SimInput in = random_input(shape, 60, 20, 8, 3);
  auto p = policy("streamingllm", 36, shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(r.name, "streamingllm_b36");
  for (int s = 0; s < 20; ++s) {
    const int q = 60 + s;
    std::vector<int> expect = range(0, 4);
    for (int t = q - 32; t <= q; ++t) expect.push_back(t);
    for (int l = 0; l < 3; ++l)
      for (int g = 0; g < 2; ++g) ASSERT_EQ(kept_at(r, in, s, l, g), expect) << "step " << s;
  }
}

TEST(StreamingLlm, BudgetSmallerThanSinksPlusWindow) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 12, 3, 4, 4);
  // sinks=4, recent=8 asked, budget 6: sinks first, recent shortened to 2.
  auto p = policy("streamingllm:recent=8", 6, shape);
  EXPECT_EQ(p->params_json(), "{\"sinks\":4,\"recent\":2}");
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 3; ++s) {
    const int q = 12 + s;
    EXPECT_EQ(kept_at(r, in, s, 0, 0), (std::vector<int>{0, 1, 2, 3, q - 2, q - 1, q}));
  }
  // Budget below the sinks: only sinks (B of them) plus the query itself.
  auto tiny = policy("streamingllm", 2, shape);
  const RunData t = run_one(in, *tiny);
  EXPECT_EQ(kept_at(t, in, 2, 0, 0), (std::vector<int>{0, 1, 14}));
}

TEST(StreamingLlm, OneTokenPrompt) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 1, 8, 4, 5);
  auto p = policy("streamingllm:sinks=1", 4, shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(kept_at(r, in, 7, 0, 0), (std::vector<int>{0, 5, 6, 7, 8}));
}

TEST(Strided, RuleBandsDoubleTheStride) {
  // recent 4: ages 0..3 dense; band 1 = ages 4..11 at stride 2; band 2 = ages 12..27 at stride 4.
  for (int age = 0; age < 4; ++age) EXPECT_TRUE(strided_rule_keeps(age, 101, 4));
  EXPECT_TRUE(strided_rule_keeps(4, 100, 4));
  EXPECT_FALSE(strided_rule_keeps(11, 101, 4));
  EXPECT_TRUE(strided_rule_keeps(12, 100, 4));
  EXPECT_FALSE(strided_rule_keeps(12, 102, 4));
  EXPECT_FALSE(strided_rule_keeps(27, 98, 4));
  EXPECT_TRUE(strided_rule_keeps(28, 96, 4));   // band 3: stride 8
  EXPECT_FALSE(strided_rule_keeps(28, 100, 4));
}

TEST(Strided, EvictsRejectedOldestFirstWithinBudget) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 16, 4, 4, 6);
  auto p = policy("strided:recent=4", 10, shape);
  const RunData r = run_one(in, *p);
  // Prefill: newest 15; over by 6; the rule rejects odd positions of ages 4..11 (11, 9, 7, 5)
  // and positions not divisible by 4 at ages 12..15 (3, 2, 1): the oldest six go first.
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 4, 6, 8, 10, 11, 12, 13, 14, 15, 16}));
  for (int s = 0; s < 4; ++s) EXPECT_EQ((int)kept_at(r, in, s, 0, 0).size(), 11);
}

TEST(PositionalPolicies, BudgetCoveringContextKeepsEverything) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 9, 6, 4, 7);
  for (const char* name : {"window", "streamingllm", "strided"}) {
    auto p = policy(name, 15, shape);
    const RunData r = run_one(in, *p);
    for (int s = 0; s < 6; ++s) EXPECT_EQ(kept_at(r, in, s, 1, 1), range(0, 9 + s + 1)) << name;
    for (float v : metric(r, "recall")->data) EXPECT_NEAR(v, 1.0f, 1e-5) << name;
  }
}
