// Key ranking's CPU twin (kernels/key_ranking.h): order_key orders floats as they compare;
// top_k_keys against a brute-force stable sort, on keys with many ties and every edge of k and n;
// head_max_logit_keys against a direct computation with zero probabilities and per-head lse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/key_ranking.h"

namespace kvs::ops {
namespace {

// The indices of the k largest keys, ascending; ties at the k-th key broken toward later indices.
std::vector<int32_t> brute_top_k(const std::vector<uint32_t>& key, int k) {
  const int n = static_cast<int>(key.size());
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return key[a] != key[b] ? key[a] > key[b] : a > b;
  });
  idx.resize(std::clamp(k, 0, n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<int32_t> top_k(const std::vector<uint32_t>& key, int k) {
  std::vector<int32_t> out(key.size() + 1, -7);  // [n + 1]: one past the largest count stays -7
  const int count = top_k_keys(key.data(), static_cast<int>(key.size()), k, out.data());
  EXPECT_EQ(out[key.size()], -7);
  EXPECT_TRUE(std::all_of(out.begin() + std::max(count, 0), out.end(), [](int32_t v) { return v == -7; }));
  out.resize(std::max(count, 0));
  return out;
}

TEST(KeyRanking, OrderKeyOrdersFloatsAsTheyCompare) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ascending = {-inf, -1e30f, -1.0f, -0.0f, 0.0f, 1e-45f, 1.0f, inf};
  for (std::size_t i = 1; i < ascending.size(); ++i) {
    EXPECT_LT(order_key(ascending[i - 1]), order_key(ascending[i])) << ascending[i - 1] << " vs " << ascending[i];
  }
  EXPECT_EQ(order_key(-0.0f) + 1, order_key(0.0f));
  EXPECT_EQ(order_key(-inf), 0x007FFFFFu);
  // Adjacent floats are adjacent keys (an ulp is one step of the key).
  EXPECT_EQ(order_key(std::nextafter(1.0f, 2.0f)), order_key(1.0f) + 1);
  EXPECT_EQ(order_key(std::nextafter(-1.0f, -2.0f)), order_key(-1.0f) - 1);
}

TEST(KeyRanking, TopKMatchesAStableSortWithManyTies) {
  std::mt19937 rng(11);
  for (const int n : {0, 1, 2, 7, 100, 1001}) {
    for (const int n_values : {1, 3, 1000000}) {  // keys drawn from a few values, or nearly distinct
      std::vector<uint32_t> pool(n_values);
      for (uint32_t& v : pool) v = rng();
      std::vector<uint32_t> key(n);
      for (uint32_t& v : key) v = pool[rng() % pool.size()];
      for (const int k : {-3, 0, 1, n / 2, n - 1, n, n + 5}) {
        SCOPED_TRACE(testing::Message() << "n " << n << ", values " << n_values << ", k " << k);
        EXPECT_EQ(top_k(key, k), brute_top_k(key, k));
      }
    }
  }
}

// Extreme keys: the lowest and highest values, the k-th key at either end.
TEST(KeyRanking, TopKHandlesExtremeKeys) {
  const std::vector<uint32_t> key = {0, 0xFFFFFFFFu, 0, 5, 0xFFFFFFFFu, 0, 0};
  for (int k = 0; k <= 8; ++k) EXPECT_EQ(top_k(key, k), brute_top_k(key, k)) << "k " << k;
  EXPECT_EQ(top_k(key, 2), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(top_k(key, 4), (std::vector<int32_t>{1, 3, 4, 6}));  // the last of the equal zeros
}

TEST(KeyRanking, HeadMaxLogitKeysMatchADirectComputation) {
  const int n_heads = 5, n = 300;
  const long stride = 320;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> rows(n_heads * stride, std::nanf(""));  // [n_heads, stride]; padding never read
  std::vector<float> lse = {0.5f, -2.0f, 3.25f, 7.0f, -0.125f};  // [n_heads]
  for (int h = 0; h < n_heads; ++h) {
    for (int j = 0; j < n; ++j) {
      float p = unit(rng) * 0.01f;
      if (j % 7 == 0 || (j % 3 == 0 && h % 2 == 0)) p = 0.0f;  // zeros; every head's for j % 7 == 0
      rows[h * stride + j] = p;
    }
  }
  std::vector<uint32_t> key(n);
  head_max_logit_keys(rows.data(), stride, lse.data(), n_heads, n, key.data());
  int n_neg_inf = 0;
  for (int j = 0; j < n; ++j) {
    float best = -std::numeric_limits<float>::infinity();
    double best_d = -HUGE_VAL;
    for (int h = 0; h < n_heads; ++h) {
      const float p = rows[h * stride + j];
      if (p == 0.0f) continue;  // log 0 = -inf never wins
      const float logit = std::log(p) + lse[h];
      if (logit > best) best = logit;
      best_d = std::max(best_d, std::log(static_cast<double>(p)) + lse[h]);
    }
    EXPECT_EQ(key[j], order_key(best)) << "key " << j;
    if (std::isinf(best)) {
      ++n_neg_inf;
    } else {
      EXPECT_NEAR(best, best_d, 1e-5 * std::fabs(best_d) + 1e-6) << "key " << j;
    }
  }
  EXPECT_EQ(n_neg_inf, (n + 6) / 7);  // the keys with every head's probability 0
  EXPECT_EQ(key[0], order_key(-std::numeric_limits<float>::infinity()));
}

}  // namespace
}  // namespace kvs::ops
