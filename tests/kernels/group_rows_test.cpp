// ops::lane_sum and ops::reduce_group_rows against a plain double-precision renormalize-and-reduce,
// the uniform row where a row sums to 0, and the lanes' order where it decides the rounding.
#include "kernels/group_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/kernels/random_data.h"

namespace kvs::ops {
namespace {

TEST(GroupRows, LaneSumIsTheSumForEveryLength) {
  for (long n : {0L, 1L, 15L, 255L, 256L, 257L, 511L, 40001L}) {
    const std::vector<float> row = test::random_vec(n, 3 + n, 0.0f, 1.0f);
    double want = 0.0;
    for (float v : row) want += v;
    EXPECT_NEAR(lane_sum(row.data(), n), want, 1e-6 * std::max(1.0, want)) << n << " entries";
  }
}

// 2^24 + 1 rounds to 2^24 (to even), 2^24 + 2 is exact: whether the 1s meet each other before
// they meet 2^24 decides the sum.
TEST(GroupRows, LaneSumAddsInItsLanesOrder) {
  std::vector<float> row(258, 0.0f);
  row[0] = 16777216.0f;  // lane 0
  row[256] = 1.0f;       // the tail's first: lane 0, onto 2^24 at once
  row[257] = 1.0f;       // the tail's second: lane 1
  EXPECT_EQ(lane_sum(row.data(), 258), 16777216.0f);  // each 1 meets 2^24 alone
  row[129] = 1.0f;  // lane 129 joins lane 1 in the first halving: 2, which lane 0 takes last
  EXPECT_EQ(lane_sum(row.data(), 258), 16777218.0f);
}

TEST(GroupRows, RenormalizesEachRowThenReduces) {
  const int n = 1000, group = 3;
  std::vector<std::vector<float>> rows;  // [group][n]
  for (int i = 0; i < group; ++i) rows.push_back(test::random_vec(n, 10 + i, 0.0f, 2.0f));
  std::fill(rows[2].begin(), rows[2].end(), 0.0f);  // spread uniformly
  const float* ptrs[group] = {rows[0].data(), rows[1].data(), rows[2].data()};
  std::vector<std::vector<double>> norm(group, std::vector<double>(n));  // [group][n]
  for (int i = 0; i < group; ++i) {
    double s = 0.0;
    for (float v : rows[i]) s += v;
    for (int j = 0; j < n; ++j) norm[i][j] = s > 0.0 ? rows[i][j] / s : 1.0 / n;
  }
  for (GroupReduce how : {GroupReduce::Mean, GroupReduce::Max, GroupReduce::Sum}) {
    std::vector<float> out(n);
    reduce_group_rows(ptrs, group, n, how, out.data());
    for (int j = 0; j < n; ++j) {
      double want = 0.0;
      for (int i = 0; i < group; ++i) want = how == GroupReduce::Max ? std::max(want, norm[i][j]) : want + norm[i][j];
      if (how == GroupReduce::Mean) want /= group;
      ASSERT_NEAR(out[j], want, 1e-6 * want) << "key " << j << ", reduce " << static_cast<int>(how);
    }
  }
}

}  // namespace
}  // namespace kvs::ops
