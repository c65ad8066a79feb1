// The prefill-summary path of the hooks (what a GPU backend sends instead of the P x P rows):
// summaries built by the capture twins (kernels/capture.h) from the same prompt attention give the
// PrefillReducer and the trace the same evidence as the rows; observers say what they need, and
// a fan-out asks for rows when any of its observers does.
#include <gtest/gtest.h>

#include "analysis/prefill_evidence.h"
#include "analysis/recorder.h"
#include "kernels/capture.h"
#include "synthetic_engine.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using namespace kvs::testing;

// Reduces the prompt's attention the way the GPU backend does — one block of every query row per
// (layer, head), window W — and sends the summaries.
void send_summaries(AttentionObserver& o, const Prompt& p, int W) {
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      const float* block = p.row(l, h, 0);                         // [P, P] rows of queries 0..P-1
      const float* lse = p.lse.data() + ((size_t)l * kH + h) * kP;  // [P]
      std::vector<float> colsum(kP, 0.0f);                          // [P]
      std::vector<float> window((size_t)W * kP, -1.0f);             // [W, P]
      std::vector<float> window_lse(W, -1.0f);                      // [W]
      ops::colsum_add(colsum.data(), kP, block, 1, kP, kP, kP);
      ops::window_rows(window.data(), window_lse.data(), block, lse, 1, kP, kP, kP, 0, kP, W);
      PrefillSummary s;
      s.layer = l;
      s.head = h;
      s.prompt_len = kP;
      s.window = W;
      s.colsum = colsum.data();
      s.window_rows = window.data();
      s.window_lse = window_lse.data();
      o.on_prefill_summary(s);
    }
}

TEST(PrefillSummary, ReducerGetsTheSameEvidenceAsFromRows) {
  std::mt19937 rng(5);
  const Prompt p = make_prompt(rng);
  const auto prompt = prompt_ids();
  PrefillReducer from_rows({kL, kH, kHkv, 8}, 4), from_summary({kL, kH, kHkv, 8}, 4);
  from_rows.on_begin(tiny_config(), prompt);
  from_summary.on_begin(tiny_config(), prompt);
  EXPECT_FALSE(from_summary.prefill_need().rows);
  EXPECT_EQ(from_summary.prefill_need().window, 4);
  send_prefill(from_rows, p);
  send_summaries(from_summary, p, 5);  // a wider window than asked: the reducer keeps the last 4
  const PrefillEvidence &a = from_rows.evidence(), &b = from_summary.evidence();
  ASSERT_EQ(a.colsum.size(), b.colsum.size());
  for (size_t i = 0; i < a.colsum.size(); ++i) EXPECT_NEAR(a.colsum[i], b.colsum[i], 1e-6f) << i;
  EXPECT_EQ(a.window_rows, b.window_rows);
  EXPECT_EQ(a.window_lse, b.window_lse);
}

TEST(PrefillSummary, ReducerRefusesASummaryNarrowerThanItsWindow) {
  std::mt19937 rng(6);
  const Prompt p = make_prompt(rng);
  PrefillReducer red({kL, kH, kHkv, 8}, 4);
  red.on_begin(tiny_config(), prompt_ids());
  EXPECT_THROW(send_summaries(red, p, 3), std::logic_error);
}

TEST(PrefillSummary, FanoutNeedsRowsWhenAnyObserverDoes) {
  PrefillReducer narrow({kL, kH, kHkv, 8}, 4), wide({kL, kH, kHkv, 8}, 16);
  AttentionObserver rows_observer;  // the default: rows
  ObserverFanout summaries_only;
  summaries_only.add(&narrow);
  summaries_only.add(&wide);
  EXPECT_FALSE(summaries_only.prefill_need().rows);
  EXPECT_EQ(summaries_only.prefill_need().window, 16);
  ObserverFanout mixed;
  mixed.add(&narrow);
  mixed.add(&rows_observer);
  EXPECT_TRUE(mixed.prefill_need().rows);
}

TEST(PrefillSummary, RecorderAsksForRowsOnlyWhileTheMapFitsItsBudget) {
  TempDir dir;
  TraceRecorder within(dir.file("a.h5"), tiny_meta(), 2, kDefaultCaptureBudget, 4);
  EXPECT_TRUE(within.prefill_need().rows);
  TraceRecorder over(dir.file("b.h5"), tiny_meta(), 2, 1000, 4);  // the map takes 1152 bytes
  EXPECT_FALSE(over.prefill_need().rows);
  EXPECT_EQ(over.prefill_need().window, 4);
}

TEST(PrefillSummary, TraceFromSummariesHoldsTheSameReductions) {
  TempDir dir;
  std::mt19937 rng(7);
  const Prompt p = make_prompt(rng);
  const auto prompt = prompt_ids();
  auto record = [&](const std::string& path, bool summaries) {
    TraceRecorder rec(path, tiny_meta(), 1, 1000, 4);
    rec.on_begin(tiny_config(), prompt);
    for (int i = 0; i < kP; ++i) rec.on_token(i, prompt[i]);
    if (summaries) send_summaries(rec, p, 4);
    else send_prefill(rec, p);
    rec.on_prefill_end(kP);
    rec.on_token(kP, 2);
    std::mt19937 decode_rng(8);
    send_decode(rec, decode_rng, kP);
    rec.finish(text_of);
  };
  record(dir.file("rows.h5"), false);
  record(dir.file("summary.h5"), true);
  const PrefillEvidence a = TraceReader(dir.file("rows.h5")).read_prefill();
  const PrefillEvidence b = TraceReader(dir.file("summary.h5")).read_prefill();
  ASSERT_EQ(a.colsum.size(), b.colsum.size());
  for (size_t i = 0; i < a.colsum.size(); ++i) EXPECT_NEAR(a.colsum[i], b.colsum[i], 1e-6f) << i;
  EXPECT_EQ(a.window_rows, b.window_rows);
  EXPECT_EQ(a.window_lse, b.window_lse);
}

}  // namespace
}  // namespace kvs
