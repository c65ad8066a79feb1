// rank_keys (inference/key_ranking.h): a layer's decode keys ranked by their logit maximized over
// the heads that attended them — heads with different key lists, keys at or past `below`, ties,
// zero probabilities, k past the candidates — and the device twin's ranking where heads share keys.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inference/key_ranking.h"
#include "kernels/key_ranking.h"

namespace kvs {
namespace {

// A decode row over `keys` whose logits are `logits` (probabilities normalized, lse computed).
struct Row {
  std::vector<int32_t> keys;
  std::vector<float> probs;
  float lse = 0.0f;
  Row(std::vector<int32_t> k, const std::vector<double>& logits) : keys(std::move(k)) {
    double sum = 0.0;
    for (double z : logits) sum += std::exp(z);
    lse = static_cast<float>(std::log(sum));
    for (double z : logits) probs.push_back(static_cast<float>(std::exp(z) / sum));
  }
  AttentionBlock block(int head) const {
    return AttentionBlock::decode_row(0, head, 20, static_cast<int>(keys.size()), keys.data(), probs.data(), &lse);
  }
};

std::vector<int32_t> rank(const std::vector<Row>& rows, int k, int below) {
  std::vector<AttentionBlock> heads;
  for (std::size_t h = 0; h < rows.size(); ++h) heads.push_back(rows[h].block(static_cast<int>(h)));
  return rank_keys(heads, {k, below});
}

TEST(RankKeys, TakesEachPositionsLargestLogitOverTheHeadsThatAttendedIt) {
  // Head 0 attends 0..5, head 1 only 1, 3, 6 (its keys differ): position 3 ranks by head 1's
  // logit 4, 6 is past `below`, 4 (logit 2.5) beats 0 (2), and 2, 5 are low in head 0.
  const std::vector<Row> rows = {Row({0, 1, 2, 3, 4, 5}, {2.0, 1.0, -3.0, 0.5, 2.5, -1.0}),
                                 Row({1, 3, 6}, {-2.0, 4.0, 9.0})};
  EXPECT_EQ(rank(rows, 3, 6), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(rank(rows, 1, 6), (std::vector<int32_t>{3}));
  EXPECT_EQ(rank(rows, 1, 7), (std::vector<int32_t>{6}));
  EXPECT_EQ(rank(rows, 10, 6), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));  // every candidate, none unattended
  EXPECT_EQ(rank(rows, 2, 3), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(rank(rows, 0, 6).empty());
  EXPECT_TRUE(rank(rows, 3, 0).empty());
}

TEST(RankKeys, TiesGoToTheLaterPositionsAndZerosRankLast) {
  const std::vector<Row> tied = {Row({0, 1, 2, 3, 4}, {1.0, 1.0, 1.0, 1.0, 1.0})};
  EXPECT_EQ(rank(tied, 2, 5), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(rank(tied, 2, 3), (std::vector<int32_t>{1, 2}));
  // A probability of exactly 0 (logit -inf) is still a candidate, ranked below every other.
  Row zeros({0, 1, 2}, {0.0, 0.0, 0.0});
  zeros.probs = {0.0f, 1.0f, 0.0f};
  zeros.lse = 0.0f;
  EXPECT_EQ(rank({zeros}, 2, 3), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(rank({zeros}, 3, 3), (std::vector<int32_t>{0, 1, 2}));
}

// Where every head attends the same keys, the ranking is the device twin's over the rows side by
// side (ops::head_max_logit_keys, ops::top_k_keys), index j being the j-th key.
TEST(RankKeys, HeadsSharingTheirKeysRankAsTheDeviceTwin) {
  std::mt19937 rng(7);
  std::normal_distribution<double> logit(0.0, 2.0);
  const int H = 6, n = 300, below_index = 250, k = 40;
  std::vector<int32_t> keys(n);
  for (int j = 0; j < n; ++j) keys[j] = 3 * j + (j % 2);  // ascending, with gaps
  std::vector<Row> rows;
  for (int h = 0; h < H; ++h) {
    std::vector<double> z(n);
    for (double& v : z) v = std::round(logit(rng) * 4.0) / 4.0;  // many ties
    rows.emplace_back(keys, z);
  }
  std::vector<float> side_by_side(static_cast<std::size_t>(H) * n);  // [H, n]
  std::vector<float> lse(H);                                          // [H]
  for (int h = 0; h < H; ++h) {
    std::copy(rows[h].probs.begin(), rows[h].probs.end(), side_by_side.begin() + static_cast<std::size_t>(h) * n);
    lse[h] = rows[h].lse;
  }
  std::vector<uint32_t> order(below_index);  // [below_index]
  ops::head_max_logit_keys(side_by_side.data(), n, lse.data(), H, below_index, order.data());
  std::vector<int32_t> idx(k);
  idx.resize(ops::top_k_keys(order.data(), below_index, k, idx.data()));
  std::vector<int32_t> want;
  for (int32_t i : idx) want.push_back(keys[i]);
  EXPECT_EQ(rank(rows, k, keys[below_index]), want);
}

}  // namespace
}  // namespace kvs
