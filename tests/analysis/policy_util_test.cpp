// Shared policy helpers: top-k tie rule, pooling, GQA reductions, window scores, renormalization.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "analysis/policy_util.h"
#include "sim_fixture.h"

using namespace kvs;

TEST(TopK, TiesEvictTheOlderPosition) {
  const std::vector<float> s = {0.5f, 0.2f, 0.5f, 0.2f, 0.9f};
  EXPECT_EQ(top_k_indices(s, 2), (std::vector<int>{2, 4}));
  EXPECT_EQ(top_k_indices(s, 3), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(top_k_indices(s, 4), (std::vector<int>{0, 2, 3, 4}));
  EXPECT_EQ(top_k_indices(s, 9), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(top_k_indices(s, 0).empty());
  std::vector<uint8_t> keep = {9};
  top_k_keep(s, 1, 6, keep);
  EXPECT_EQ(keep, (std::vector<uint8_t>{0, 0, 0, 0, 1, 0}));  // past the scores: not kept
}

// 1..max_n scores of `distinct` values: full of ties.
static std::vector<float> tied_scores(std::mt19937& rng, int max_n, int distinct) {
  std::vector<float> s(1 + rng() % max_n);  // [n]
  for (float& v : s) v = static_cast<float>(rng() % distinct);
  return s;
}

// Against a full sort by (score, index), both descending: every k, on scores full of ties.
TEST(TopK, MatchesAFullSortForEveryK) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> s = tied_scores(rng, 40, 4);
    const int n = static_cast<int>(s.size());
    std::vector<int> order(n);  // [n] best first
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return s[a] != s[b] ? s[a] > s[b] : a > b; });
    for (int k = 0; k <= n; ++k) {
      std::vector<int> want(order.begin(), order.begin() + k);
      std::sort(want.begin(), want.end());
      ASSERT_EQ(top_k_indices(s, k), want) << "n " << n << " k " << k;
    }
  }
}

// top_k_keep marks what top_k_indices chooses, for every k (its own path at k = n - 1, the case
// a cache one entry over its budget takes every step), over held lists longer than the scores
// (the entries past them are not kept).
TEST(TopK, TopKKeepMarksTheIndicesChosen) {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<float> s = tied_scores(rng, 30, 3);
    const int n = static_cast<int>(s.size());
    for (int k = 0; k <= n; ++k) {
      std::vector<uint8_t> want(n + 3, 0), got = {7};
      for (int i : top_k_indices(s, k)) want[i] = 1;
      top_k_keep(s, k, n + 3, got);
      ASSERT_EQ(got, want) << "n " << n << " k " << k;
    }
  }
}

// The one-left-out path over lists of many blocks of 32 scores: the lowest first found in any
// block, or only in the part after the last whole block, ties before and after it.
TEST(TopK, TopKKeepLeavesOutTheFirstLowestOfLongLists) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<float> s = tied_scores(rng, 300, 6);
    const int n = static_cast<int>(s.size());
    for (float& v : s) v += 1.0f;                 // one lowest, placed anywhere, or none (ties)
    if (trial % 3 != 0) s[rng() % n] = 0.5f;
    if (trial % 5 == 0) s[n - 1 - rng() % std::min(n, 31)] = 0.25f;  // past the whole blocks
    std::vector<uint8_t> want(n, 0), got;
    for (int i : top_k_indices(s, n - 1)) want[i] = 1;
    top_k_keep(s, n - 1, n, got);
    ASSERT_EQ(got, want) << "n " << n;
  }
}

TEST(Pool, AvgCountsPaddingMaxPadsWithMinusInfinity) {
  const std::vector<float> x = {3, 0, 6, 3};
  const std::vector<float> a = pool1d(x, 3, Pool::Avg);
  EXPECT_FLOAT_EQ(a[0], 1.0f);  // (0 + 3 + 0) / 3: the pad counts
  EXPECT_FLOAT_EQ(a[1], 3.0f);
  EXPECT_FLOAT_EQ(a[2], 3.0f);
  EXPECT_FLOAT_EQ(a[3], 3.0f);  // (6 + 3 + 0) / 3
  const std::vector<float> m = pool1d(std::vector<float>{-3, -5, -1, -4}, 3, Pool::Max);
  EXPECT_EQ(m, (std::vector<float>{-3, -1, -1, -1}));
  EXPECT_EQ(pool1d(x, 1, Pool::Avg), x);
}

TEST(Gqa, Reductions) {
  const float a[] = {1, 4}, b[] = {3, 2};
  const float* rows[] = {a, b};
  EXPECT_EQ(reduce_group(rows, 2, GqaReduce::Mean), (std::vector<float>{2, 3}));
  EXPECT_EQ(reduce_group(rows, 2, GqaReduce::Max), (std::vector<float>{3, 4}));
  EXPECT_EQ(reduce_group(rows, 2, GqaReduce::Sum), (std::vector<float>{4, 6}));
  std::vector<float> out = {7, 7};  // [2] overwritten, not added to
  reduce_group(rows, GqaReduce::Max, out);
  EXPECT_EQ(out, (std::vector<float>{3, 4}));
}

TEST(Renormalize, KeepsRawLogits) {
  const std::vector<float> row = {0.1f, 0.2f, 0.3f, 0.4f};
  const float lse = 1.5f;
  const std::vector<int32_t> keys = {1, 3};
  std::vector<float> out(2);
  const float lse2 = renormalize_row(row, lse, keys, out);
  EXPECT_NEAR(out[0], 0.2f / 0.6f, 1e-6);
  EXPECT_NEAR(out[1], 0.4f / 0.6f, 1e-6);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(std::log(out[i]) + lse2, std::log(row[keys[i]]) + lse, 1e-5);
}

// A policy's group rows (ops::reduce_group_rows, which the engines and the simulator make) are the
// numbers its rows renormalized over their keys (renormalize_kept) and reduced over the group
// (reduce_group) would give it, bit for bit: one renormalization in every driver.
TEST(Renormalize, GroupRowsAreTheRenormalizedRowsReduced) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int n : {1, 7, 300, 2049}) {
    std::vector<std::vector<float>> rows(4, std::vector<float>(n));  // [G][n]
    for (auto& r : rows)
      for (float& v : r) v = unit(rng) * unit(rng);
    std::vector<std::vector<float>> renormed(4, std::vector<float>(n));  // [G][n]
    std::vector<const float*> raw, kept;
    for (int i = 0; i < 4; ++i) {
      renormalize_kept(rows[i], 0.0f, renormed[i]);
      raw.push_back(rows[i].data());
      kept.push_back(renormed[i].data());
    }
    for (GqaReduce how : {GqaReduce::Mean, GqaReduce::Max, GqaReduce::Sum}) {
      std::vector<float> got(n);
      ops::reduce_group_rows(raw.data(), 4, n, how, got.data());
      EXPECT_EQ(got, reduce_group(kept, n, how)) << n << " keys, reduce " << gqa_name(how);
    }
  }
}

TEST(WindowScores, SumsTheLastRowsOverThePrefix) {
  const ModelShape shape = kvs::test::shape_of(1, 2, 1);
  PrefillEvidence ev;
  ev.shape = shape;
  ev.prompt_len = 4;
  ev.window = 2;
  // head 0 rows (queries 2, 3), head 1 rows.
  ev.window_rows = {0.5f, 0.3f, 0.2f, 0.0f, 0.1f, 0.2f, 0.3f, 0.4f,
                    0.2f, 0.2f, 0.6f, 0.0f, 0.4f, 0.1f, 0.1f, 0.4f};
  const std::vector<float> w2 = window_scores(ev, 0, 0, 2, false);
  ASSERT_EQ(w2.size(), 2u);
  EXPECT_FLOAT_EQ(w2[0], 0.6f);
  EXPECT_FLOAT_EQ(w2[1], 0.5f);
  const std::vector<float> w1 = window_scores(ev, 0, 0, 1, true);  // last row only, prefix 0..2
  EXPECT_EQ(w1, (std::vector<float>{0.1f, 0.2f, 0.3f}));
  const std::vector<float> g = group_window_scores(ev, 0, 0, 2, false, GqaReduce::Max);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.5f);
}
