// What the attention view shows of the prompt (read_prefill_image): the full map when the trace
// kept it, else the pooled overview, else — for a trace written without one (older recordings,
// other exporters) — the last-window rows; and the prompt keys' fate under a run per image column
// (read_prompt_key_fate).
#include <gtest/gtest.h>

#include "analysis/attention_image.h"
#include "analysis/recorder.h"
#include "synthetic_engine.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using namespace kvs::testing;

std::string record(const TempDir& dir, const std::string& name, std::size_t budget, const Prompt& p) {
  const std::string path = dir.file(name);
  std::mt19937 rng(2);
  TraceRecorder rec(path, tiny_meta(), 1, budget, 4);
  record_synthetic(rec, rng, p, 1);
  rec.finish(text_of);
  return path;
}

TEST(AttentionImage, FullMapWhenStored) {
  TempDir dir;
  std::mt19937 rng(21);
  const Prompt p = make_prompt(rng);
  TraceReader r(record(dir, "full.h5", kDefaultCaptureBudget, p));
  PrefillEvidence cache;
  const PrefillImage img = read_prefill_image(r, 1, 3, cache);
  EXPECT_TRUE(img.full);
  EXPECT_EQ(img.block, 1);
  ASSERT_EQ(img.rows, kP);
  ASSERT_EQ(img.cols, kP);
  for (int q = 0; q < kP; ++q)
    for (int k = 0; k < kP; ++k) EXPECT_NEAR(img.data[q * kP + k], p.row(1, 3, q)[k], 1e-3) << q << "," << k;
}

TEST(AttentionImage, PooledOverviewWhenTheMapWasOverBudget) {
  TempDir dir;
  std::mt19937 rng(22);
  const Prompt p = make_prompt(rng);
  TraceReader r(record(dir, "pooled.h5", 1000, p));  // map 1152 bytes: pooled in 3 x 3 cells
  PrefillEvidence cache;
  const PrefillImage img = read_prefill_image(r, 0, 2, cache);
  EXPECT_FALSE(img.full);
  EXPECT_EQ(img.block, 3);
  EXPECT_EQ(img.first_query, 0);
  ASSERT_EQ(img.rows, 2);
  ASSERT_EQ(img.cols, 2);
  double mass = 0.0;  // cell (1, 0): queries 3..5 on keys 0..2
  for (int q = 3; q < 6; ++q)
    for (int k = 0; k < 3; ++k) mass += p.row(0, 2, q)[k] / 3.0;
  EXPECT_NEAR(img.data[2], mass, 1e-6);
  EXPECT_EQ(img.data[1], 0.0f);  // above the diagonal
}

TEST(AttentionImage, WindowRowsWhenTheTraceHasNoOverview) {
  TempDir dir;
  std::mt19937 rng(23);
  const Prompt p = make_prompt(rng);
  const std::string path = dir.file("window.h5");
  {  // reductions without a pooled map, as an older recording or another exporter writes them
    PrefillReducer red({kL, kH, kHkv, 8}, 4);
    red.on_begin(tiny_config(), prompt_ids());
    send_prefill(red, p);
    TraceMeta m = tiny_meta();
    TraceWriter w(path, m, 1);
    w.write_prefill(red.evidence(), {});
    write_random_step(w, rng, m, 0);
    m.n_steps = 1;
    w.commit(m, token_ids(kP + 1), token_texts(kP + 1));
  }
  TraceReader r(path);
  EXPECT_EQ(r.read_prefill_pooled(0, 0).block, 0);
  PrefillEvidence cache;
  const PrefillImage img = read_prefill_image(r, 1, 0, cache);
  EXPECT_FALSE(img.full);
  EXPECT_EQ(img.block, 1);
  ASSERT_EQ(img.rows, 4);
  ASSERT_EQ(img.cols, kP);
  EXPECT_EQ(img.first_query, kP - 4);
  for (int k = 0; k < kP; ++k) EXPECT_EQ(img.data[3 * kP + k], p.row(1, 0, kP - 1)[k]);
}

TEST(AttentionImage, PromptKeyFateIsTheFirstStepsKeptSetPerColumn) {
  TempDir dir;
  std::mt19937 rng(24);
  const Prompt p = make_prompt(rng);
  const std::string path = record(dir, "fate.h5", kDefaultCaptureBudget, p);
  const int T = kP + 1;
  RunData run;
  run.name = "hand";
  run.policy = "full";
  run.budget = 4;
  run.kept.assign((size_t)kL * kHkv * T, 1);  // [1 step, L, Hkv, T]
  uint8_t* k = run.kept.data() + ((size_t)1 * kHkv + 1) * T;  // layer 1, KV head 1
  k[1] = 0;  // evicted
  k[2] = 0;
  k[4] = 2;  // held, skipped
  append_runs(path, std::vector<RunData>{run});
  TraceReader r(path);
  const PromptKeyFate one = read_prompt_key_fate(r, "hand", 1, 1, 1);
  EXPECT_EQ(one.evicted, (std::vector<float>{0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(one.inactive, (std::vector<float>{0, 0, 0, 0, 1, 0}));
  const PromptKeyFate pooled = read_prompt_key_fate(r, "hand", 1, 1, 4);  // columns {0..3}, {4, 5}
  EXPECT_EQ(pooled.evicted, (std::vector<float>{0.5f, 0.0f}));
  EXPECT_EQ(pooled.inactive, (std::vector<float>{0.0f, 0.5f}));
  const PromptKeyFate other = read_prompt_key_fate(r, "hand", 0, 1, 1);
  EXPECT_EQ(other.evicted, std::vector<float>(kP, 0.0f));
}

// An 8K-key decode stack drawn on 1,545 px samples one key a pixel (nearest): the sink at key 0
// and a key drawing 0.2 fell between samples and vanished. Spread by half a pixel's span, every
// pixel holding a peak samples it, and nothing gains more than its neighbours' values.
TEST(AttentionImage, SpreadMaxKeepsEveryPeakUnderNearestSampling) {
  const int rows = 3, cols = 8192, width = 1545;
  std::vector<float> stack((size_t)rows * cols, 1e-5f);  // [rows, cols]
  const std::vector<int> peaks = {0, 2173, 3424, 8191};
  for (int r = 0; r < rows; ++r)
    for (int c : peaks) stack[(size_t)r * cols + c] = c == 0 ? 1.0f : 0.2f;
  const int half = (cols + 2 * width - 1) / (2 * width);  // ceil(texels per pixel / 2)
  const std::vector<float> shown = spread_max(stack.data(), rows, cols, half, 0);
  auto sampled = [&](const std::vector<float>& img, int r, int px) {  // GL_NEAREST at pixel centre
    return img[(size_t)r * cols + std::min((int)((px + 0.5) / width * cols), cols - 1)];
  };
  for (int c : peaks) {
    const int px = (int)((double)c * width / cols);
    EXPECT_LT(sampled(stack, 1, px), 0.1f) << "key " << c << " is skipped unspread (the defect)";
    EXPECT_GE(sampled(shown, 1, px), 0.2f) << "key " << c;
  }
  EXPECT_FLOAT_EQ(shown[(size_t)1 * cols + 1000], 1e-5f);  // far from any peak: unchanged
  // Rows spread too: a peak in row 0 reaches row 1 with half_y = 1, not row 2.
  stack[2173] = 0.5f;
  const std::vector<float> tall = spread_max(stack.data(), rows, cols, 0, 1);
  EXPECT_FLOAT_EQ(tall[(size_t)1 * cols + 2173], 0.5f);
  EXPECT_FLOAT_EQ(tall[(size_t)2 * cols + 2173], 0.2f);
}

// An eviction mask drawn on fewer pixels than keys: the tint is the share of evicted keys around
// each cell, so StreamingLLM's four kept sinks among 8K evicted keys keep a lighter tint, and a
// lone evicted key among kept ones still tints its pixel.
TEST(AttentionImage, SpreadShareKeepsLoneKeysOfEitherKind) {
  const int rows = 2, cols = 8192, half = 3;
  std::vector<uint8_t> mask((size_t)rows * cols, 1);  // [rows, cols] evicted
  for (int c = 0; c < 4; ++c) mask[c] = mask[(size_t)cols + c] = 0;  // sinks kept
  mask[(size_t)cols + 5000] = 2;                                      // one inactive key in row 1
  const std::vector<float> e = spread_share(mask.data(), rows, cols, half, 0, 1);
  EXPECT_FLOAT_EQ(e[0], 0.0f);                  // window [0, 3]: the four sinks
  EXPECT_FLOAT_EQ(e[2], 2.0f / 6.0f);           // window [0, 5]: keys 4 and 5 evicted
  EXPECT_FLOAT_EQ(e[100], 1.0f);
  EXPECT_FLOAT_EQ(e[(size_t)cols + 5000], 6.0f / 7.0f);
  const std::vector<float> in = spread_share(mask.data(), rows, cols, half, 1, 2);
  EXPECT_FLOAT_EQ(in[5000], 1.0f / 14.0f);      // rows 0-1 x 7 columns: one inactive cell
  EXPECT_FLOAT_EQ(in[(size_t)cols + 4990], 0.0f);
  const std::vector<float> none = spread_share(mask.data(), rows, cols, 0, 0, 1);
  for (size_t i = 0; i < mask.size(); ++i) ASSERT_EQ(none[i], mask[i] == 1 ? 1.0f : 0.0f) << i;
}

}  // namespace
}  // namespace kvs
