// SnapKV, PyramidKV and Ada-KV (prefill-once, observation-window scores) on hand-worked rows.
#include <gtest/gtest.h>

#include "analysis/policy_adakv.h"
#include "analysis/policy_pyramidkv.h"
#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

// L=1, H=2, Hkv=1 (GQA 2), P=8, window rows for queries 6 and 7; two decode steps.
static SimInput hand_input() {
  SimInput in = random_input(shape_of(1, 2, 1), 8, 2, 2, 31);
  in.prefill.window_rows = {
      0.3f, 0.0f, 0.1f, 0.0f, 0.0f, 0.1f, 0.5f, 0.0f,  // head 0, query 6
      0.0f, 0.2f, 0.0f, 0.0f, 0.1f, 0.1f, 0.3f, 0.3f,  // head 0, query 7
      0.1f, 0.0f, 0.1f, 0.2f, 0.0f, 0.0f, 0.6f, 0.0f,  // head 1, query 6
      0.1f, 0.0f, 0.0f, 0.2f, 0.0f, 0.0f, 0.3f, 0.4f,  // head 1, query 7
  };
  return in;  // prefix sums: head 0 (.3,.2,.1,0,.1,.2), head 1 (.2,0,.1,.4,0,0); mean (.25,.1,.1,.2,.05,.1)
}

TEST(SnapKv, HandWorkedGqaMeanNoPooling) {
  const SimInput in = hand_input();
  auto p = policy("snapkv:window=2,kernel=1", 5, in.shape);
  const RunData r = run_one(in, *p);
  // Top 3 of the prefix: .25 (0), .2 (3), then .1 at 1, 2, 5: the newest (5) wins the tie.
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 3, 5, 6, 7, 8}));
  EXPECT_EQ(kept_at(r, in, 1, 0, 0), (std::vector<int>{0, 3, 5, 6, 7, 8, 9}));  // decode never evicted
}

TEST(SnapKv, MaxPooling) {
  const SimInput in = hand_input();
  auto p = policy("snapkv:window=2,kernel=3,pool=max", 5, in.shape);
  const RunData r = run_one(in, *p);
  // Pooled: .25 .25 .2 .2 .2 .1 -> 0, 1 and the newest of the .2 ties (4).
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 1, 4, 6, 7, 8}));
}

TEST(SnapKv, WindowCappedToRecordedWindowAndBudget) {
  const SimInput in = hand_input();  // recorded window 2
  for (const char* name : {"snapkv", "pyramidkv", "adakv"}) {
    auto p = policy(std::string(name) + ":window=4,kernel=1", 5, in.shape);  // asks 4 of 2 rows
    EXPECT_EQ(p->caveat(8), "") << name << ": not known before the prompt is cut";
    run_one(in, *p);
    EXPECT_EQ(p->caveat(8), "its window (4) is longer than the 2 observation rows the prompt's evidence holds: it "
                            "scored with the last 2")
        << name;
  }
  auto p = policy("snapkv:kernel=1", 5, in.shape);  // asks 32
  const RunData r = run_one(in, *p);
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 3, 5, 6, 7, 8}));
  auto fits = policy("snapkv:window=2,kernel=1", 5, in.shape);
  run_one(in, *fits);
  EXPECT_EQ(fits->caveat(8), "") << "the rows held cover the window";
  auto tiny = policy("snapkv:window=2,kernel=1", 1, in.shape);  // B below the window
  EXPECT_EQ(kept_at(run_one(in, *tiny), in, 0, 0, 0), (std::vector<int>{7, 8}));
}

// A window covering the budget leaves nothing chosen by score: the policy says so for a prompt it
// compresses, and only then.
TEST(SnapKv, CaveatWhenTheWindowCoversTheBudget) {
  const ModelShape shape = shape_of(2, 4, 2);
  for (const char* name : {"snapkv", "pyramidkv", "adakv"}) {
    EXPECT_NE(policy(name, 32, shape)->caveat(56).find("window (32) covers the whole budget (32)"), std::string::npos)
        << name;
    EXPECT_EQ(policy(name, 32, shape)->caveat(32), "") << name << ": nothing to compress";
    EXPECT_EQ(policy(std::string(name) + ":window=8", 32, shape)->caveat(56), "") << name;
  }
  EXPECT_EQ(policy("h2o", 4, shape)->caveat(56), "");
}

TEST(SnapKv, BudgetCoveringPromptKeepsEverything) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 12, 4, 4, 32);
  for (const char* name : {"snapkv", "pyramidkv", "adakv", "kvzip"}) {
    auto p = policy(name, 12, shape);
    const RunData r = run_one(in, *p);
    for (int s = 0; s < 4; ++s) EXPECT_EQ(kept_at(r, in, s, 1, 1), range(0, 13 + s)) << name;
    auto one = random_input(shape, 1, 3, 4, 33);
    auto q = policy(name, 4, shape);
    EXPECT_EQ(kept_at(run_one(one, *q), one, 2, 0, 0), range(0, 4)) << name;
  }
}

// Below 1 the schedule would grow with depth, the opposite of a pyramid.
TEST(PyramidKv, BetaBelowOneIsAnInputError) {
  EXPECT_THROW(policy("pyramidkv:beta=0.5", 32, shape_of(2, 4, 2)), InputError);
  EXPECT_NO_THROW(policy("pyramidkv:beta=1", 32, shape_of(2, 4, 2)));
}

TEST(PyramidKv, WorkedExampleFromPolicies) {
  const std::vector<int> b = pyramid_prefix_budgets(32, 300, 128, 8, 20.0);
  ASSERT_EQ(b.size(), 32u);
  EXPECT_EQ(b[0], 234);  // + 8 window tokens
  EXPECT_EQ(b[31], 17);
  EXPECT_EQ(b[1], 227);
  // Special cases: P < B keeps everything, P < 2 (B - w) is uniform.
  EXPECT_EQ(pyramid_prefix_budgets(4, 100, 128, 8, 20.0), std::vector<int>(4, 92));
  EXPECT_EQ(pyramid_prefix_budgets(4, 200, 128, 8, 20.0), std::vector<int>(4, 120));
  // max_num capped to the prefix: P = 240, n - w = 232 < 234.
  const std::vector<int> c = pyramid_prefix_budgets(32, 240, 128, 8, 20.0);
  EXPECT_EQ(c[0], 232);
  EXPECT_EQ(c[31], 232 - 31 * ((232 - 8) / 31));
}

TEST(PyramidKv, LayersKeepTheirScheduledCounts) {
  const ModelShape shape = shape_of(3, 2, 1);
  const SimInput in = random_input(shape, 40, 1, 4, 34);
  auto p = policy("pyramidkv:window=4", 12, shape);
  const RunData r = run_one(in, *p);
  const std::vector<int> b = pyramid_prefix_budgets(3, 40, 12, 4, 20.0);  // 16 8 0 (min 0, max 16)
  for (int l = 0; l < 3; ++l) EXPECT_EQ((int)kept_at(r, in, 0, l, 0).size(), b[l] + 4 + 1);
  EXPECT_NE(r.params_json.find("\"layer_budgets\":[20,12,4]"), std::string::npos) << r.params_json;
}

TEST(AdaKv, AllocationByHand) {
  // b = 4, alpha 0.25 (floor 1), no normalization: the global top 8 takes h0's 6 and h1's 2;
  // b_h = round(6 * .75 + 1) = round(5.5) = 6 (half to even), round(2 * .75 + 1) = round(2.5) = 2.
  const std::vector<std::vector<float>> s = {{.9f, .8f, .7f, .6f, .5f, .4f}, {.3f, .2f, .1f, .05f, 0.f, 0.f}};
  EXPECT_EQ(adakv_allocate(s, 4, 0.25, false), (std::vector<int>{6, 2}));
  // Normalization: h0 flat (rho = 4/6, weighted .333), h1 (rho = 1, .4): h1 wins 4 of 8.
  const std::vector<std::vector<float>> t = {{.5f, .5f, .5f, .5f, .5f, .5f}, {.4f, .4f, .4f, .4f, 0.f, 0.f}};
  EXPECT_EQ(adakv_allocate(t, 4, 0.0, false), (std::vector<int>{6, 2}));
  EXPECT_EQ(adakv_allocate(t, 4, 0.0, true), (std::vector<int>{4, 4}));
  // The floor: alpha 0.5 -> b_floor 2, c = (6, 2) -> 5, 3.
  EXPECT_EQ(adakv_allocate(t, 4, 0.5, false), (std::vector<int>{5, 3}));
}

TEST(AdaKv, HeadsKeepTheirAllocationPlusWindow) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 40, 1, 8, 35);
  auto p = policy("adakv:window=4", 10, shape);
  const RunData r = run_one(in, *p);
  for (int l = 0; l < 2; ++l) {
    const int total = (int)kept_at(r, in, 0, l, 0).size() + (int)kept_at(r, in, 0, l, 1).size();
    EXPECT_NEAR(total, 2 * (10 + 1), 1);  // the layer total stays ~Hkv * B (+ the query)
    for (int g = 0; g < 2; ++g)
      for (int t = 36; t <= 40; ++t) {
        const auto k = kept_at(r, in, 0, l, g);
        EXPECT_TRUE(std::count(k.begin(), k.end(), t)) << t;  // window + query kept
      }
  }
}
