// TOVA: per-layer set from the mean over all query heads of the last row.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "analysis/position_slots.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

// L=1, H=4, Hkv=2 (GQA 2), P=4, one decode step.
static SimInput hand_input() {
  SimInput in;
  in.shape = shape_of(1, 4, 2);
  in.prompt_len = 4;
  in.n_steps = 2;
  in.total_len = 6;
  in.rows.assign(2 * 4 * 6, 0.0f);
  const float step0[4][5] = {{0.4f, 0.1f, 0.1f, 0.2f, 0.2f}, {0.4f, 0.1f, 0.1f, 0.2f, 0.2f},
                             {0.0f, 0.1f, 0.5f, 0.2f, 0.2f}, {0.0f, 0.1f, 0.5f, 0.2f, 0.2f}};
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < 5; ++j) in.rows[h * 6 + j] = step0[h][j];
  for (int h = 0; h < 4; ++h)
    for (int j = 0; j < 6; ++j) in.rows[24 + h * 6 + j] = 1.0f / 6.0f;
  in.lse.assign(8, 0.0f);
  PrefillEvidence& ev = in.prefill;
  ev.shape = in.shape;
  ev.prompt_len = 4;
  ev.window = 1;
  ev.colsum.assign(16, 1.0f);
  // Last prompt row per head; mean over heads = (.2, .3, .2, .3): ties keep the newer.
  ev.window_rows = {0.1f, 0.3f, 0.3f, 0.3f, 0.3f, 0.3f, 0.1f, 0.3f,
                    0.2f, 0.3f, 0.2f, 0.3f, 0.2f, 0.3f, 0.2f, 0.3f};
  ev.window_lse.assign(4, 0.0f);
  return in;
}

TEST(Tova, OneSetPerLayerFromTheMeanOfAllHeads) {
  const SimInput in = hand_input();
  auto p = policy("tova", 2, in.shape);
  const RunData r = run_one(in, *p);
  // Prefill: scores .2 .3 .2 .3 -> keep 1 and 3 in both KV heads.
  for (int g = 0; g < 2; ++g) EXPECT_EQ(kept_at(r, in, 0, 0, g), (std::vector<int>{1, 3, 4}));
  // Step 0 over {1,3,4}: every head renormalizes to (.2, .4, .4) -> keep 3 and 4.
  for (int g = 0; g < 2; ++g) EXPECT_EQ(kept_at(r, in, 1, 0, g), (std::vector<int>{3, 4, 5}));
}

TEST(Tova, BudgetCoveringContextAndOneTokenPrompt) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 8, 5, 4, 21);
  auto p = policy("tova", 13, shape);
  const RunData r = run_one(in, *p);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(kept_at(r, in, s, 0, 1), range(0, 9 + s));
  const SimInput one = random_input(shape, 1, 4, 4, 22);
  auto q = policy("tova", 2, shape);
  const RunData r1 = run_one(one, *q);
  EXPECT_EQ(kept_at(r1, one, 0, 0, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(kept_at(r1, one, 3, 1, 1).size(), 3u);
}

// The naive TOVA step over group rows of thousands of keys (the sum goes a chunk of keys at a
// time): each KV head's group row / H added at its keys, one after another, then each KV head's top B held
// entries by a full sort of (score, position). KV heads that hold the same positions share a
// choice: here they do not in layer 0 and do in layers 1 and 2. Rows point at the cache's held
// lists in layers 0 and 1 (known equal by the choice) and at copies in layer 2 (compared).
TEST(Tova, LongRowsMatchTheNaiveStepWhetherKvHeadsHoldTheSameOrNot) {
  const ModelShape shape = shape_of(3, 4, 2);
  const int B = 15000, q_pos = 40000;  // a run of 4 rows over ~34K keys: chunks side by side
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  PositionSlots kv(3, 2);
  for (int p = 0; p <= q_pos; ++p) {
    if (p % 7 != 3 || p == q_pos) kv.append(0, 0, p);  // layer 0: the KV heads differ
    if (p % 7 != 4 || p == q_pos) kv.append(0, 1, p);  // as many entries
    for (int l = 1; l < 3; ++l)
      if (p % (3 + l) != 0 || p == q_pos)
        for (int g = 0; g < 2; ++g) kv.append(l, g, p);  // the same positions
  }
  auto pol = policy("tova", B, shape);
  pol->begin(PolicyContext{shape, 1, nullptr, {}, {}});
  for (int l = 0; l < 3; ++l) {
    std::vector<std::vector<int32_t>> held(2);  // [Hkv][held] before the step
    for (int g = 0; g < 2; ++g) held[g].assign(kv.held(l, g).begin(), kv.held(l, g).end());
    std::vector<std::vector<float>> values(2);  // [Hkv][held of its KV head] the group rows (sums of 2 heads)
    std::vector<GroupRow> group;
    std::vector<float> score(q_pos + 1, 0.0f);  // [positions] the naive sum
    for (int g = 0; g < 2; ++g) {
      const std::vector<int32_t>& keys = held[g];
      for (size_t j = 0; j < keys.size(); ++j) values[g].push_back(2.0f * unit(rng));
      for (size_t j = 0; j < keys.size(); ++j) score[keys[j]] += values[g][j] / 4.0f;
      const int32_t* key_pos = l < 2 ? kv.held(l, g).data() : keys.data();
      group.push_back({g, (int)keys.size(), key_pos, values[g].data()});
    }
    EXPECT_EQ(pol->group_rows(l), ops::GroupReduce::Sum);
    pol->on_group_rows(l, q_pos, group);
    pol->after_attention(l, q_pos, {}, kv);
    for (int g = 0; g < 2; ++g) {
      std::vector<int32_t> want = held[g];
      std::sort(want.begin(), want.end(),
                [&](int32_t a, int32_t b) { return score[a] != score[b] ? score[a] > score[b] : a > b; });
      want.resize(B);
      std::sort(want.begin(), want.end());
      const std::span<const int32_t> got = kv.held(l, g);
      EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want) << "layer " << l << " KV head " << g;
      const std::span<const int32_t> scored = pol->scored_set(l, g, kv);
      EXPECT_EQ(std::vector<int32_t>(scored.begin(), scored.end()), want) << "layer " << l << " KV head " << g;
    }
  }
}
