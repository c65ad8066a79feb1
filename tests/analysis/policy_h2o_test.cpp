// H2O on hand-worked attention (GQA: 2 query heads per KV head), ties, budgets and turnover.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "analysis/position_slots.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

// L=1, H=2, Hkv=1, P=4, two decode steps.
static SimInput hand_input() {
  SimInput in;
  in.shape = shape_of(1, 2, 1);
  in.prompt_len = 4;
  in.n_steps = 2;
  in.total_len = 6;
  in.rows = {
      0.1f, 0.1f, 0.2f, 0.2f, 0.4f, 0.0f,  // step 0, head 0 (q = 4)
      0.2f, 0.2f, 0.1f, 0.3f, 0.2f, 0.0f,  // step 0, head 1
      0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.5f,  // step 1, head 0 (q = 5)
      0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.5f,  // step 1, head 1
  };
  in.lse = {0.0f, 0.0f, 0.0f, 0.0f};
  PrefillEvidence& ev = in.prefill;
  ev.shape = in.shape;
  ev.prompt_len = 4;
  ev.window = 1;
  ev.colsum = {4, 1, 3, 2,   // head 0
               2, 3, 3, 0};  // head 1 -> mean 3, 2, 3, 1
  ev.window_rows = {0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};
  ev.window_lse = {0.0f, 0.0f};
  return in;
}

TEST(H2o, HandWorkedGqaMeanWithTies) {
  const SimInput in = hand_input();
  auto p = policy("h2o:heavy=1,recent=1", 2, in.shape);
  const RunData r = run_one(in, *p);
  // Prefill: candidates 0..2 with acc 3, 2, 3: the tie 0 vs 2 keeps the newer 2; recent keeps 3.
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{2, 3, 4}));
  // Step 0 rows renormalized over {2,3,4}: head 0 (.25,.25,.5), head 1 (1/6,.5,1/3); mean added:
  // acc(2) = 3.208, acc(3) = 1.375 -> keep 2 and the recent 4.
  EXPECT_EQ(kept_at(r, in, 1, 0, 0), (std::vector<int>{2, 4, 5}));
  const NamedArray* turn = metric(r, "hh_turnover");
  ASSERT_NE(turn, nullptr);
  EXPECT_FLOAT_EQ(turn->data[0], 0.0f);  // {2} -> {2}
}

TEST(H2o, MaxReductionChangesTheChoice) {
  const SimInput in = hand_input();
  // gqa=max over colsum: 4, 3, 3, 2 -> heavy 1 keeps position 0 at prefill.
  auto p = policy("h2o:heavy=1,recent=1,gqa=max", 2, in.shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 3, 4}));
}

TEST(H2o, BudgetCoveringContextKeepsEverything) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 10, 5, 4, 11);
  auto p = policy("h2o", 15, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(kept_at(r, in, s, 1, 0), range(0, 11 + s));
  for (float v : metric(r, "recall")->data) EXPECT_NEAR(v, 1.0f, 1e-5);
}

TEST(H2o, CarriesBudgetAndAttendsBPlusOne) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 30, 10, 4, 12);
  auto p = policy("h2o", 8, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 10; ++s)
    for (int l = 0; l < 2; ++l)
      for (int g = 0; g < 2; ++g) {
        const std::vector<int> k = kept_at(r, in, s, l, g);
        ASSERT_EQ(k.size(), 9u);
        // The recent half (4) plus the query itself are always there.
        for (int t = 30 + s - 4; t <= 30 + s; ++t) EXPECT_TRUE(std::count(k.begin(), k.end(), t));
      }
}

TEST(H2o, OneTokenPrompt) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 1, 6, 1, 13);
  auto p = policy("h2o", 2, shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(kept_at(r, in, 5, 0, 0).size(), 3u);
}

// The naive H2O over a prompt long enough that the KV heads run side by side (worth_a_team):
// each KV head's scores are its query heads' mean column sums, then the mean of their decode rows
// added at the keys; it keeps the top `heavy` of the entries before the last `recent` by a full
// sort of (score, position), and the last `recent`.
// A group row over some of the held entries only (an engine attending a sliding window) adds to
// those entries' scores, matched by position: P = 6, scores 6..1 by the prompt; heavy 2 + recent
// 1 keep {0, 1, 5}; the step at 6 attends {5, 6} only with 10 and 0.5, so 5 (now 11) outranks 1.
TEST(H2o, GroupRowsOverSomeHeldEntriesAddByPosition) {
  const ModelShape shape = shape_of(1, 2, 1);
  PrefillEvidence ev;
  ev.shape = shape;
  ev.prompt_len = 6;
  ev.colsum = {7, 5, 3, 4, 1, 0,   // head 0
               5, 5, 5, 2, 3, 2};  // head 1: means 6, 5, 4, 3, 2, 1
  auto pol = policy("h2o:heavy=2,recent=1", 3, shape);
  pol->begin(PolicyContext{shape, 6, &ev, {}, {}});
  PositionSlots kv(1, 1);
  kv.fill_prompt(6);
  pol->after_prefill(6, kv);
  ASSERT_EQ(std::vector<int32_t>(kv.held(0, 0).begin(), kv.held(0, 0).end()), (std::vector<int32_t>{0, 1, 5}));
  kv.append(0, 0, 6);
  const int32_t keys[] = {5, 6};
  const float values[] = {10.0f, 0.5f};
  const GroupRow row{0, 2, keys, values};
  pol->on_group_rows(0, 6, {&row, 1});
  pol->after_attention(0, 6, {}, kv);
  EXPECT_EQ(std::vector<int32_t>(kv.held(0, 0).begin(), kv.held(0, 0).end()), (std::vector<int32_t>{0, 5, 6}));
}

TEST(H2o, LongPromptMatchesTheNaivePolicy) {
  const ModelShape shape = shape_of(1, 8, 2);
  const int P = 17000, heavy = 2000, recent = 1500, G = 4;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  PrefillEvidence ev;
  ev.shape = shape;
  ev.prompt_len = P;
  ev.colsum.resize((size_t)8 * P);  // [L, H, P]
  for (float& v : ev.colsum) v = unit(rng);
  auto pol = policy("h2o:heavy=2000,recent=1500", heavy + recent, shape);
  pol->begin(PolicyContext{shape, P, &ev, {}, {}});
  PositionSlots kv(1, 2);
  kv.fill_prompt(P);
  pol->after_prefill(P, kv);

  std::vector<std::vector<float>> acc(2, std::vector<float>(P + 1, 0.0f));  // [Hkv][positions]
  std::vector<std::vector<int32_t>> want(2);                                 // [Hkv][kept]
  const auto naive_trim = [&](int g, const std::vector<int32_t>& held) {
    const int n_cand = (int)held.size() - recent;
    std::vector<int32_t> cand(held.begin(), held.begin() + n_cand);
    const std::vector<float>& a = acc[g];
    std::sort(cand.begin(), cand.end(), [&](int32_t x, int32_t y) { return a[x] != a[y] ? a[x] > a[y] : x > y; });
    cand.resize(heavy);
    std::sort(cand.begin(), cand.end());
    want[g] = cand;
    want[g].insert(want[g].end(), held.end() - recent, held.end());
  };
  for (int g = 0; g < 2; ++g) {
    for (int p = 0; p < P; ++p) {
      for (int i = 0; i < G; ++i) acc[g][p] += ev.colsum_at(0, g * G + i)[p];
      acc[g][p] /= (float)G;
    }
    naive_trim(g, range(0, P));
    const std::span<const int32_t> got = kv.held(0, g);
    ASSERT_EQ(std::vector<int32_t>(got.begin(), got.end()), want[g]) << "prefill, KV head " << g;
  }

  for (int g = 0; g < 2; ++g) kv.append(0, g, P);
  // The step's group rows: what the drivers reduce each KV head's query-head rows to.
  std::vector<std::vector<float>> values(2);  // [Hkv][held of its KV head]
  std::vector<GroupRow> group;
  for (int g = 0; g < 2; ++g) {
    const std::span<const int32_t> keys = kv.held(0, g);
    for (size_t j = 0; j < keys.size(); ++j) values[g].push_back(unit(rng));
    for (size_t j = 0; j < keys.size(); ++j) acc[g][keys[j]] += values[g][j];
    group.push_back({g, (int)keys.size(), keys.data(), values[g].data()});
  }
  std::vector<std::vector<int32_t>> held_before(2);  // [Hkv][held] before the step's eviction
  for (int g = 0; g < 2; ++g) held_before[g].assign(kv.held(0, g).begin(), kv.held(0, g).end());
  EXPECT_EQ(pol->group_rows(0), ops::GroupReduce::Mean);
  EXPECT_FALSE(pol->needs_decode_rows(0));
  pol->on_group_rows(0, P, group);
  pol->after_attention(0, P, {}, kv);
  for (int g = 0; g < 2; ++g) {
    naive_trim(g, held_before[g]);
    const std::span<const int32_t> got = kv.held(0, g);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want[g]) << "decode, KV head " << g;
    const std::span<const int32_t> scored = pol->scored_set(0, g, kv);
    EXPECT_EQ(std::vector<int32_t>(scored.begin(), scored.end()),
              std::vector<int32_t>(want[g].begin(), want[g].begin() + heavy)) << "KV head " << g;
  }
}
