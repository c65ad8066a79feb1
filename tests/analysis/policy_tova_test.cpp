// TOVA: per-layer set from the mean over all query heads of the last row.
#include <gtest/gtest.h>

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
