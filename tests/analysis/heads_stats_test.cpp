// Head statistics (sink mass, locality, entropy) and the profiled DuoAttention gate on hand rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "analysis/head_stats.h"
#include "inference/errors.h"

namespace kvs {
namespace {

ModelShape shape(int L, int H, int Hkv) {
  ModelShape s;
  s.n_layers = L;
  s.n_heads = H;
  s.n_kv_heads = Hkv;
  s.head_dim = 4;
  return s;
}

TEST(HeadStatsTest, AllMassOnFirstKeyIsSinkWithZeroEntropy) {
  const int T = 40, q = 39;
  std::vector<float> rows(2 * T, 0.0f);  // L=1, H=2
  rows[0] = 1.0f;                        // head 0: all on key 0
  for (int j = 0; j < T; ++j) rows[T + j] = 1.0f / T;  // head 1: uniform
  HeadStatsAccumulator acc(shape(1, 2, 1), {});
  acc.add_step(rows, T, q);
  HeadStats st = acc.finish();
  EXPECT_FLOAT_EQ(st.sink_mass[0], 1.0f);
  EXPECT_FLOAT_EQ(st.entropy[0], 0.0f);
  EXPECT_FLOAT_EQ(st.locality[0], 0.0f);
  EXPECT_NEAR(st.sink_mass[1], 4.0 / T, 1e-6);
  EXPECT_NEAR(st.locality[1], 32.0 / T, 1e-6);  // keys 8..39
  EXPECT_NEAR(st.entropy[1], std::log((double)T), 1e-5);
  // KV head 0 groups both query heads.
  EXPECT_NEAR(st.kv_sink_mass[0], 0.5 * (1.0 + 4.0 / T), 1e-6);
  EXPECT_NEAR(st.kv_entropy[0], 0.5 * std::log((double)T), 1e-5);
}

TEST(HeadStatsTest, MeansOverStepsAndRespectsQueryPosition) {
  const int T = 10;
  HeadStatsOptions opt;
  opt.sinks = 2;
  opt.local_window = 3;
  HeadStatsAccumulator acc(shape(1, 1, 1), opt);
  // Step 0, query at 5: mass 0.5 on key 5 (itself), 0.5 on key 1.
  std::vector<float> a(T, 0.0f);
  a[5] = 0.5f;
  a[1] = 0.5f;
  acc.add_step(a, T, 5);
  // Step 1, query at 6: uniform over keys 0..3 (locality window 4..6 gets nothing).
  std::vector<float> b(T, 0.0f);
  for (int j = 0; j < 4; ++j) b[j] = 0.25f;
  acc.add_step(b, T, 6);
  HeadStats st = acc.finish();
  EXPECT_EQ(st.n_steps, 2);
  EXPECT_NEAR(st.sink_mass[0], 0.5 * (0.5 + 0.5), 1e-7);
  EXPECT_NEAR(st.locality[0], 0.5 * (0.5 + 0.0), 1e-7);
  EXPECT_NEAR(st.entropy[0], 0.5 * (std::log(2.0) + std::log(4.0)), 1e-6);
}

// Entropy against -sum p log p in double, term by term, on rows whose lengths leave every tail
// of the eight-lane loop, with zeros and subnormals mixed in (skipped: their terms are < 1e-36).
TEST(HeadStatsTest, EntropyMatchesAScalarDoubleSum) {
  std::mt19937 rng(7);
  std::exponential_distribution<float> heavy(1.0f);
  for (int T : {1, 7, 8, 9, 63, 64, 65, 1000, 3579}) {
    std::vector<float> row(T);  // L = H = 1
    double total = 0.0;
    for (int j = 0; j < T; ++j) {
      row[j] = j % 11 == 3 ? 0.0f : j % 13 == 5 ? 1e-40f : std::pow(heavy(rng), 4.0f);
      total += row[j];
    }
    for (float& p : row) p = static_cast<float>(p / total);
    double want = 0.0;
    for (float p : row)
      if (p >= 1.17549435e-38f) want -= (double)p * std::log((double)p);
    HeadStatsAccumulator acc(shape(1, 1, 1), {});
    acc.add_step(row, T, T - 1);
    EXPECT_NEAR(acc.finish().entropy[0], want, 2e-6 * std::max(1.0, want)) << "T = " << T;
  }
}

TEST(HeadStatsTest, ProfiledAlphaIsMassOutsideSinkAndRecent) {
  // L=1, H=4, Hkv=2 (group 2). Query at 9, sink 2, recent 3 -> attended keys {0,1} ∪ [6, 9].
  const int T = 10, q = 9;
  std::vector<float> rows(4 * T, 0.0f);
  rows[0 * T + 0] = 1.0f;                          // head 0: sink only -> 0
  rows[1 * T + 4] = 0.6f; rows[1 * T + 9] = 0.4f;  // head 1: 0.6 outside
  rows[2 * T + 2] = 0.5f; rows[2 * T + 5] = 0.5f;  // head 2: all outside -> 1
  rows[3 * T + 6] = 1.0f;                          // head 3: recent -> 0
  std::vector<int> qpos = {q};
  std::vector<float> alpha = profile_alpha_from_rows(shape(1, 4, 2), rows, T, qpos, 2, 3);
  ASSERT_EQ(alpha.size(), 2u);
  EXPECT_NEAR(alpha[0], 0.3f, 1e-6);
  EXPECT_NEAR(alpha[1], 0.5f, 1e-6);
}

TEST(HeadStatsTest, BadInputIsInputError) {
  HeadStatsAccumulator acc(shape(1, 1, 1), {});
  EXPECT_THROW(acc.finish(), InputError);
  std::vector<float> row(5, 0.2f);
  EXPECT_THROW(acc.add_step(row, 5, 5), InputError);
  EXPECT_THROW(acc.add_step(row, 4, 1), InputError);
  HeadStatsOptions bad;
  bad.local_window = 0;
  EXPECT_THROW(HeadStatsAccumulator(shape(1, 1, 1), bad), InputError);
  std::vector<int> none;
  EXPECT_THROW(profile_alpha_from_rows(shape(1, 1, 1), {}, 5, none, 4, 4), InputError);
  std::vector<int> q = {4};
  EXPECT_THROW(profile_alpha_from_rows(shape(1, 1, 1), row, 5, q, -1, 4), InputError);
}

}  // namespace
}  // namespace kvs
