// OmniKV: filter layers select prompt positions from raw logits (head max), sparse layers mark
// the rest inactive; layer roles and default filter layers.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/policy_omnikv.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

TEST(OmniKv, LayerRolesMatchThePaperExample) {
  const std::vector<OmniRole> r = omnikv_layer_roles(32, {2, 8, 18}, 1);
  std::vector<int> dense, sparse;
  for (int l = 0; l < 32; ++l) (r[l] == OmniRole::Sparse ? sparse : dense).push_back(l);
  EXPECT_EQ(dense, (std::vector<int>{0, 1, 2, 3, 8, 9, 18, 19}));
  EXPECT_EQ(sparse.size(), 24u);
  EXPECT_EQ(r[2], OmniRole::Filter);
  EXPECT_EQ(r[9], OmniRole::Wait);
}

TEST(OmniKv, DefaultFilterLayers) {
  EXPECT_EQ(omnikv_default_filters(32), (std::vector<int>{4, 13, 22}));
  EXPECT_EQ(omnikv_default_filters(30), (std::vector<int>{3, 12, 21}));
  EXPECT_EQ(omnikv_default_filters(5), (std::vector<int>{2}));
  EXPECT_EQ(omnikv_default_filters(1), (std::vector<int>{0}));
}

// L=4, H=2, Hkv=1, P=10, filter layer 1, wait 1: layer 3 is sparse.
TEST(OmniKv, SelectsByHeadMaxOfRawLogitsAndSkipsTheRest) {
  const ModelShape shape = shape_of(4, 2, 1);
  SimInput in = random_input(shape, 10, 2, 4, 61);
  const int T = in.total_len;
  auto row = [&](int s, int l, int h) { return in.rows.data() + (((size_t)s * 4 + l) * 2 + h) * T; };
  auto lse = [&](int s, int l, int h) -> float& { return in.lse[((size_t)s * 4 + l) * 2 + h]; };
  // Step 0 (q = 10), layer 1: head 0 peaks at 2 and 5 (lse 0), head 1 at 7 (lse 1). Raw logits:
  // head 1 at 7 = log .5 + 1 = .31; head 0 at 2, 5 = log .3 = -1.20; all else <= -2.0.
  std::fill(row(0, 1, 0), row(0, 1, 0) + T, 0.0f);
  std::fill(row(0, 1, 1), row(0, 1, 1) + T, 0.0f);
  for (int j = 0; j <= 10; ++j) {
    row(0, 1, 0)[j] = (j == 2 || j == 5) ? 0.3f : 0.4f / 9.0f;
    row(0, 1, 1)[j] = j == 7 ? 0.5f : 0.05f;
  }
  lse(0, 1, 0) = 0.0f;
  lse(0, 1, 1) = 1.0f;
  // Step 1 (q = 11), layer 1: uniform rows -> all ties -> the newest prompt positions 7, 8, 9.
  for (int h = 0; h < 2; ++h) {
    std::fill(row(1, 1, h), row(1, 1, h) + T, 1.0f / 12.0f);
    lse(1, 1, h) = 0.0f;
  }
  auto p = policy("omnikv:filters=1,wait=1", 3, shape);
  const RunData r = run_one(in, *p);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(kept_at(r, in, 0, l, 0), range(0, 11)) << l;
  EXPECT_EQ(kept_at(r, in, 0, 3, 0), (std::vector<int>{2, 5, 7, 10}));
  EXPECT_EQ(kept_at(r, in, 0, 3, 0, 2), (std::vector<int>{0, 1, 3, 4, 6, 8, 9}));
  EXPECT_EQ(kept_at(r, in, 1, 3, 0), (std::vector<int>{7, 8, 9, 10, 11}));
  const NamedArray* inactive = metric(r, "inactive");
  EXPECT_FLOAT_EQ(inactive->data[3], 7.0f);  // step 0, layer 3
  EXPECT_FLOAT_EQ(metric(r, "evicted")->data[3], 0.0f);
}

TEST(OmniKv, FracAndBudgetCoveringPrompt) {
  const ModelShape shape = shape_of(6, 4, 2);
  const SimInput in = random_input(shape, 20, 3, 4, 62);
  auto p = policy("omnikv:filters=1", 20, shape);
  const RunData r = run_one(in, *p);
  for (float v : metric(r, "recall")->data) EXPECT_NEAR(v, 1.0f, 1e-5);
  auto f = policy("omnikv:filters=1,frac=0.25", 1, shape);
  const RunData rf = run_one(in, *f);
  EXPECT_EQ(kept_at(rf, in, 0, 5, 1).size(), 5u + 1u);  // k = 0.25 * 20 prompt + the query
  EXPECT_NE(rf.params_json.find("\"k\":5"), std::string::npos);
}
