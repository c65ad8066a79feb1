// Head statistics and the profiled α read from an HDF5 trace equal the in-memory computation.
#include <gtest/gtest.h>

#include <cstdio>

#include "analysis/head_stats.h"
#include "analysis/trace.h"
#include "analysis/trace_snapshot.h"
#include "decode_trace_fixture.h"
#include "inference/errors.h"

namespace kvs {
namespace {

TEST(HeadsTraceTest, TraceMatchesInMemoryRows) {
  const std::string path = ::testing::TempDir() + "heads_trace_test.h5";
  test::DecodeTrace t = test::write_decode_trace(path, 3, 4, 2, 50, 6, 5);
  const int T = t.total_len();
  TraceReader reader(path);
  HeadStatsAccumulator acc(t.shape, {});
  for (int s = 0; s < t.n_steps; ++s) {
    const size_t step = (size_t)3 * 4 * T;
    acc.add_step(std::span<const float>(t.rows).subspan(s * step, step), T, t.q_pos[s]);
  }
  HeadStats want = acc.finish();
  HeadStats got = head_stats(reader);
  EXPECT_EQ(got.n_steps, 6);
  EXPECT_EQ(got.sink_mass, want.sink_mass);
  EXPECT_EQ(got.locality, want.locality);
  EXPECT_EQ(got.entropy, want.entropy);
  EXPECT_EQ(got.kv_entropy.size(), 6u);
  for (float h : got.entropy) {
    EXPECT_GT(h, 0.0f);
    EXPECT_LT(h, std::log((float)T));
  }
  std::vector<float> alpha = profile_alpha(reader, 4, 16);
  EXPECT_EQ(alpha, profile_alpha_from_rows(t.shape, t.rows, T, t.q_pos, 4, 16));
  ASSERT_EQ(alpha.size(), 6u);
  for (float a : alpha) {
    EXPECT_GT(a, 0.0f);
    EXPECT_LT(a, 1.0f);
  }
  // sink + recent covering every key leaves nothing outside.
  for (float a : profile_alpha(reader, 4, T)) EXPECT_EQ(a, 0.0f);
  EXPECT_THROW(profile_alpha(reader, -1, 4), InputError);
  std::remove(path.c_str());
}

// The app's snapshot keeps where each stored head statistic came from (its "source" attribute:
// `heads --model` writes how alpha was estimated), "" for one stored without it.
TEST(HeadsTraceTest, SnapshotKeepsEachStoredStatisticsSource) {
  const std::string path = ::testing::TempDir() + "heads_snapshot_test.h5";
  test::write_decode_trace(path, 3, 4, 2, 50, 6, 5);
  append_array(path, "/heads/alpha", {"alpha", {3, 2}, std::vector<float>(6, 0.5f)}, {{"source", "estimated on m.gguf"}});
  append_array(path, "/heads/sink_mass", {"sink_mass", {3, 4}, std::vector<float>(12, 0.25f)});
  const auto snap = load_trace_snapshot(TraceReader(path));
  ASSERT_EQ(snap->head_stats.size(), 2u);
  ASSERT_EQ(snap->head_stat_sources.size(), 2u);
  EXPECT_EQ(snap->head_stats[0].name, "alpha");
  EXPECT_EQ(snap->head_stat_sources[0], "estimated on m.gguf");
  EXPECT_EQ(snap->head_stats[1].name, "sink_mass");
  EXPECT_EQ(snap->head_stat_sources[1], "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kvs
