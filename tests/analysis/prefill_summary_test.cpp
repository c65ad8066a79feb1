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
// (layer, head), window W, pooled map in pool x pool cells when pool > 0 — and sends the summaries.
void send_summaries(AttentionObserver& o, const Prompt& p, int W, int pool = 0) {
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      const float* block = p.row(l, h, 0);                         // [P, P] rows of queries 0..P-1
      const float* lse = p.lse.data() + ((size_t)l * kH + h) * kP;  // [P]
      std::vector<float> colsum(kP, 0.0f);                          // [P]
      std::vector<float> window((size_t)W * kP, -1.0f);             // [W, P]
      std::vector<float> window_lse(W, -1.0f);                      // [W]
      const int nb = pool > 0 ? (kP + pool - 1) / pool : 0;
      std::vector<float> pooled((size_t)nb * nb, 0.0f);             // [nb, nb]
      ops::colsum_add(colsum.data(), kP, block, 1, kP, kP, kP);
      ops::window_rows(window.data(), window_lse.data(), block, lse, 1, kP, kP, kP, 0, kP, W);
      if (pool > 0) ops::pool_add(pooled.data(), block, 1, kP, kP, kP, 0, kP, pool);
      PrefillSummary s;
      s.layer = l;
      s.head = h;
      s.prompt_len = kP;
      s.window = W;
      s.colsum = colsum.data();
      s.window_rows = window.data();
      s.window_lse = window_lse.data();
      s.pool_block = pool;
      s.pooled = pool > 0 ? pooled.data() : nullptr;
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

// Block means of the full prompt map, recomputed here: [nb, nb] for (l, h).
std::vector<double> block_means(const Prompt& p, int l, int h, int pool) {
  const int nb = (kP + pool - 1) / pool;
  std::vector<double> m((size_t)nb * nb, 0.0);
  for (int q = 0; q < kP; ++q) {
    const int a = q / pool, rows = std::min(pool, kP - a * pool);
    for (int k = 0; k <= q; ++k) m[(size_t)a * nb + k / pool] += p.row(l, h, q)[k] / rows;
  }
  return m;
}

TEST(PrefillSummary, PooledMapFromRowsAndFromSummariesIsTheBlockMeans) {
  std::mt19937 rng(15);
  const Prompt p = make_prompt(rng);
  const auto prompt = prompt_ids();
  PrefillReducer from_rows({kL, kH, kHkv, 8}, 4, 4), from_summary({kL, kH, kHkv, 8}, 4, 4);
  EXPECT_EQ(from_summary.prefill_need().pool_block, 4);
  from_rows.on_begin(tiny_config(), prompt);
  from_summary.on_begin(tiny_config(), prompt);
  send_prefill(from_rows, p);  // prefill blocks of kBlock rows
  send_summaries(from_summary, p, 4, 4);
  for (const PrefillReducer* r : {&from_rows, &from_summary}) {
    const PrefillEvidence& e = r->evidence();
    ASSERT_EQ(e.pool_block, 4);
    ASSERT_EQ(e.n_pool, 2);  // pool rows {0..3}, {4, 5}
    for (int l = 0; l < kL; ++l)
      for (int h = 0; h < kH; ++h) {
        const std::vector<double> want = block_means(p, l, h, 4);
        for (int a = 0; a < 2; ++a) {
          double row_sum = 0.0;
          for (int b = 0; b < 2; ++b) {
            const float got = e.pooled_at(l, h)[a * 2 + b];
            EXPECT_NEAR(got, want[a * 2 + b], 1e-6) << "layer " << l << " head " << h << " cell " << a << "," << b;
            row_sum += got;
          }
          EXPECT_NEAR(row_sum, 1.0, 1e-6);
        }
      }
  }
}

TEST(PrefillSummary, ReducerKeepsACoarserPoolingAndRefusesAMissingOne) {
  std::mt19937 rng(16);
  const Prompt p = make_prompt(rng);
  PrefillReducer fine({kL, kH, kHkv, 8}, 4, 2), none({kL, kH, kHkv, 8}, 4);
  ObserverFanout both;
  both.add(&fine);
  both.add(&none);
  EXPECT_EQ(both.prefill_need().pool_block, 2);
  fine.on_begin(tiny_config(), prompt_ids());
  send_summaries(fine, p, 4, 3);  // another observer asked for 3 x 3 cells
  EXPECT_EQ(fine.evidence().pool_block, 3);
  EXPECT_EQ(fine.evidence().n_pool, 2);
  EXPECT_NEAR(fine.evidence().pooled_at(1, 2)[2], block_means(p, 1, 2, 3)[2], 1e-6);
  PrefillReducer wants({kL, kH, kHkv, 8}, 4, 2);
  wants.on_begin(tiny_config(), prompt_ids());
  EXPECT_THROW(send_summaries(wants, p, 4, 0), std::logic_error);
}

TEST(PrefillSummary, PoolBlockForFitsCellsAndBudget) {
  EXPECT_EQ(pool_block_for(6, 2, 4, 1 << 20), 1);           // the whole map fits
  EXPECT_EQ(pool_block_for(6, 2, 4, 250), 3);               // 2 x 4 heads x 2 x 2 cells x 4 bytes
  EXPECT_EQ(pool_block_for(32768, 32, 32, 64u << 20), 256);  // 128 x 128 cells x 1024 heads x 4 B = 64 MiB
  EXPECT_EQ(pool_block_for(5000, 1, 1, 1u << 30), 10);      // at most kMaxPoolCells per side
  EXPECT_EQ(pool_block_for(6, 1, 1, 0), 6);                 // nothing fits: one cell
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
  EXPECT_EQ(within.prefill_need().pool_block, 0);
  EXPECT_EQ(over.prefill_need().pool_block, 3);  // 2 x 2 cells of 3 x 3 positions fit 1000 / 4 bytes
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
    if (summaries) send_summaries(rec, p, 4, rec.prefill_need().pool_block);
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
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      const PooledMap x = TraceReader(dir.file("rows.h5")).read_prefill_pooled(l, h);
      const PooledMap y = TraceReader(dir.file("summary.h5")).read_prefill_pooled(l, h);
      ASSERT_EQ(x.block, 3);
      ASSERT_EQ(y.block, 3);
      ASSERT_EQ(x.cells.size(), 4u);
      for (size_t i = 0; i < x.cells.size(); ++i) EXPECT_NEAR(x.cells[i], y.cells[i], 1e-6f) << i;
    }
}

}  // namespace
}  // namespace kvs
