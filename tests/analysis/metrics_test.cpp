// Run metrics: retained mass, top-k miss, paged bytes freed, set turnover, per-step arrays.
#include <gtest/gtest.h>

#include "analysis/metrics.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

TEST(Metrics, PagedBytesFreedByHand) {
  const int bytes = 64;  // per entry
  // q = 40: complete blocks [0,16) and [16,32); [32,41) is partial and never freed.
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{3, 33, 40}, 40, 16, bytes), 16 * 64);
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{20, 40}, 40, 16, bytes), 16 * 64);
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{3, 20, 40}, 40, 16, bytes), 0);
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{40}, 40, 16, bytes), 2 * 16 * 64);
  // q = 47: three complete blocks.
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{47}, 47, 16, bytes), 2 * 16 * 64);
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{46, 47}, 47, 16, 1), 2 * 16);
  EXPECT_EQ(paged_bytes_freed(std::vector<int32_t>{0, 1, 2}, 2, 16, 1), 0);
}

TEST(Metrics, MassMissAndTurnover) {
  const std::vector<float> row = {0.1f, 0.4f, 0.2f, 0.3f};
  EXPECT_FLOAT_EQ(retained_mass(row, std::vector<int32_t>{1, 3}), 0.7f);
  const std::vector<uint8_t> attended = {1, 0, 0, 1};
  EXPECT_FLOAT_EQ(topk_miss_fraction(std::vector<int32_t>{1, 3}, attended), 0.5f);
  EXPECT_FLOAT_EQ(jaccard_distance(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{2, 3, 4}), 0.5f);
  EXPECT_FLOAT_EQ(jaccard_distance(std::vector<int32_t>{}, std::vector<int32_t>{}), 0.0f);
  FullRowCache cache;
  EXPECT_EQ(cache.top_k(0, 0, 2, row), (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(cache.mass(0, 0, row), 1.0f);
}

// Recall is the share of the row's own mass: rows stored in float16 sum to 1 only within their
// rounding (up to ~1e-3), and full's recall read 1.0002 on such a trace.
TEST(Metrics, RecallIsAShareOfTheRowsMass) {
  const ModelShape shape = shape_of(2, 4, 2);
  SimInput in = random_input(shape, 20, 5, 4, 82);
  for (float& p : in.rows) p *= 1.0004f;  // as a rounding that lost nothing but the sum
  auto full = policy("full", 0, shape);
  const RunData r = run_one(in, *full);
  for (float v : metric(r, "recall")->data) {
    EXPECT_NEAR(v, 1.0f, 1e-6);
    EXPECT_LE(v, 1.0f + 1e-6f);
  }
}

TEST(Metrics, FullRecallIsOneAndCountsAreExact) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 20, 5, 4, 81);
  auto full = policy("full", 0, shape);
  const RunData r = run_one(in, *full);
  for (float v : metric(r, "recall")->data) EXPECT_NEAR(v, 1.0f, 1e-5);
  for (float v : metric(r, "evicted")->data) EXPECT_EQ(v, 0.0f);
  auto sl = policy("streamingllm", 8, shape);  // 4 sinks + 4 recent
  const RunData s = run_one(in, *sl);
  const NamedArray& recall = *metric(s, "recall");
  for (int step = 0; step < 5; ++step) {
    const int q = 20 + step;
    const size_t m = ((size_t)step * 2 + 1) * 2 + 1;  // layer 1, KV head 1
    EXPECT_FLOAT_EQ(metric(s, "kept")->data[m], 9.0f);
    EXPECT_FLOAT_EQ(metric(s, "evicted")->data[m], (float)(q + 1 - 9));
    EXPECT_FLOAT_EQ(metric(s, "kv_bytes")->data[m], 9.0f * 2 * 8 * 4);
    // Hand recall: group heads 2 and 3 of layer 1, mass on 0..3 and q-4..q.
    float mass = 0.0f;
    for (int h = 2; h < 4; ++h) {
      const float* row = in.rows.data() + (((size_t)step * 2 + 1) * 4 + h) * in.total_len;
      for (int t = 0; t <= q; ++t)
        if (t < 4 || t >= q - 4) mass += row[t] / 2.0f;
    }
    EXPECT_NEAR(recall.data[m], mass, 1e-5);
    // Positions 4 .. q-5 are gone: block [0,16) holds sinks, so only a block inside the gap counts.
    const float freed = metric(s, "paged_bytes_freed")->data[m];
    EXPECT_FLOAT_EQ(freed, 0.0f);  // [16, 32) still holds the recent window for q <= 24
  }
}
