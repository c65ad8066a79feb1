// Device twin of kernels/key_ranking.cu against ops::head_max_logit_keys + ops::top_k_keys: random
// rows over a stride wider than the keys, ties cut by k, zero probabilities (-inf logits), k at
// both ends, one key, and keys over many of the select block's 1024 segments. The selection is
// checked exactly on any device (the twin's top k of the device's own keys); the head-max keys are
// the twin's bits on the emulation (the host's logf), and then so must be the index list, and within
// 2 ulps on a GPU, whose logf may round differently, where the lists may differ next to the k-th key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <random>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/key_ranking.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

constexpr int64_t kUlps = 2;  // device logf vs the host's, in steps of the order key

int64_t key_gap(uint32_t a, uint32_t b) { return std::abs(static_cast<int64_t>(a) - static_cast<int64_t>(b)); }

// rank_keys over rows [n_heads, stride] and lse [n_heads] against the twin. Returns the twin's
// keys (for the tests' own checks of their setup).
std::vector<uint32_t> check_rank(const std::vector<float>& rows, long stride, const std::vector<float>& lse,
                                 int n_heads, int n, int k) {
  SCOPED_TRACE(testing::Message() << n_heads << " heads, " << n << " keys, k " << k);
  std::vector<uint32_t> want_keys(std::max(n, 0));  // [n]
  ops::head_max_logit_keys(rows.data(), stride, lse.data(), n_heads, n, want_keys.data());
  std::vector<int32_t> want(std::max(n, 0));  // [count]
  const int count = ops::top_k_keys(want_keys.data(), n, k, want.data());
  want.resize(count);

  // Ranked twice, with a one-launch ranking (k >= n) between: the emulation runs a launch's
  // blocks in one of four thread orders picked by how many launches came before, so the select
  // block of the second ranking runs in another order than the first's. Both give the same bits.
  const std::size_t out_size = std::max(n, 0) + 8;
  auto drows = upload(rows), dlse = upload(lse);
  std::vector<int32_t> got;
  std::vector<uint32_t> keys;
  DeviceBuffer<int32_t> one(1, "test one index");  // [1]
  for (int run = 0; run < 2; ++run) {
    if (run == 1) rank_keys(one.get(), nullptr, 0, nullptr, 0, 1, 1, nullptr, nullptr);
    auto dscratch = upload(std::vector<uint32_t>(std::max(n, 1), 0xABABABABu));  // [n]
    auto dout = upload(std::vector<int32_t>(out_size, -7));                       // [n + 8]
    rank_keys(dout.get(), drows.get(), stride, dlse.get(), n_heads, n, k, dscratch.get(), nullptr);
    test::sync("rank_keys");
    if (run == 0) {
      got = download(dout);
      keys = download(dscratch);
    } else {
      EXPECT_EQ(download(dout), got) << "the second ranking differs from the first";
      EXPECT_EQ(download(dscratch), keys) << "the second ranking's keys differ from the first's";
    }
  }
  EXPECT_TRUE(std::all_of(got.begin() + count, got.end(), [](int32_t v) { return v == -7; }))
      << "written past the " << count << " ranked indices";
  got.resize(count);
  if (count == 0 || count == n) {  // nothing to rank: no keys, or all of them
    EXPECT_EQ(got, want);
    return want_keys;
  }

  // The head-max keys: within kUlps of the twin's, each.
  keys.resize(n);
  int far = 0, first_far = -1;
  for (int j = 0; j < n; ++j) {
    if (key_gap(keys[j], want_keys[j]) > kUlps && far++ == 0) first_far = j;
  }
  EXPECT_EQ(far, 0) << "head-max keys more than " << kUlps << " ulps from the twin's; first at " << first_far;
  // The selection is exact: the twin's top k of the device's own keys.
  std::vector<int32_t> of_device_keys(n);
  of_device_keys.resize(ops::top_k_keys(keys.data(), n, k, of_device_keys.data()));
  EXPECT_EQ(got, of_device_keys);
  if (keys == want_keys) {
    EXPECT_EQ(got, want);
    return want_keys;
  }
  // Keys an ulp or two off: the lists may differ only at keys next to the k-th. A key kUlps off,
  // against a k-th key up to kUlps off the other way, may cross it: 2 kUlps of the twin's k-th key.
  std::vector<uint32_t> sorted = want_keys;
  std::nth_element(sorted.begin(), sorted.begin() + (count - 1), sorted.end(), std::greater<uint32_t>());
  const uint32_t kth = sorted[count - 1];
  std::vector<int32_t> differ;
  std::set_symmetric_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(differ));
  for (const int32_t j : differ) {
    EXPECT_LE(key_gap(want_keys[j], kth), 2 * kUlps) << "index " << j << " ranked differently, far from the k-th key";
  }
  return want_keys;
}

// rows [n_heads, stride]: probabilities in [1e-6, 1), the padding past n NaN (never read).
std::vector<float> random_rows(int n_heads, long stride, int n, uint64_t seed) {
  std::vector<float> rows(n_heads * stride, std::nanf(""));
  const std::vector<float> p = test::random_vec(n_heads * stride, seed, 1e-6f, 1.0f);
  for (int h = 0; h < n_heads; ++h) std::copy_n(p.begin() + h * stride, n, rows.begin() + h * stride);
  return rows;
}

TEST(CudaKeyRanking, RandomRowsOverAWideStride) {
  KVS_REQUIRE_GPU();
  const int n_heads = 9, n = 3700;
  const long stride = 4096;
  const std::vector<float> lse = test::random_vec(n_heads, 1, -3.0f, 6.0f);
  const std::vector<float> rows = random_rows(n_heads, stride, n, 2);
  check_rank(rows, stride, lse, n_heads, n, 250);
  check_rank(rows, stride, lse, n_heads, n, 1);
  check_rank(rows, stride, lse, n_heads, n, n - 1);
}

// Probabilities from four values: few distinct keys, and k cuts through a run of equal ones (the
// later indices of the run are taken).
TEST(CudaKeyRanking, TiesCutByK) {
  KVS_REQUIRE_GPU();
  const int n_heads = 3, n = 5000;
  const long stride = n;
  const std::vector<float> values = {0.5f, 0.125f, 0.01f, 1e-4f};
  const std::vector<float> lse = {0.25f, 1.5f, -0.75f};
  std::mt19937 rng(4);
  std::vector<float> rows(n_heads * stride);
  for (float& p : rows) p = values[rng() % values.size()];
  for (const int k : {1234, 17, 4000}) {
    const std::vector<uint32_t> keys = check_rank(rows, stride, lse, n_heads, n, k);
    std::vector<uint32_t> sorted = keys;
    std::sort(sorted.begin(), sorted.end(), std::greater<uint32_t>());
    EXPECT_EQ(sorted[k - 1], sorted[k]) << "k " << k << " does not cut a tie";
  }
  // Every key equal: the last k indices.
  const std::vector<float> same(2 * 3000, 0.25f);
  check_rank(same, 3000, {0.0f, 0.0f}, 2, 3000, 7);
}

// Zero probabilities give -inf logits; keys whose every head is 0 rank last, and k can reach them.
TEST(CudaKeyRanking, ZeroProbabilities) {
  KVS_REQUIRE_GPU();
  const int n_heads = 4, n = 2000;
  const long stride = 2048;
  std::vector<float> rows = random_rows(n_heads, stride, n, 5);
  std::mt19937 rng(6);
  for (int h = 0; h < n_heads; ++h) {
    for (int j = 0; j < n; ++j) {
      if (j % 5 == 0 || rng() % 3 == 0) rows[h * stride + j] = 0.0f;  // j % 5 == 0: every head's
    }
  }
  const std::vector<float> lse = {2.0f, -1.0f, 0.5f, 4.0f};
  check_rank(rows, stride, lse, n_heads, n, 100);
  const std::vector<uint32_t> keys = check_rank(rows, stride, lse, n_heads, n, n - 50);  // into the -inf run
  const uint32_t neg_inf = ops::order_key(-INFINITY);
  EXPECT_GE(std::count(keys.begin(), keys.end(), neg_inf), n / 5);
}

TEST(CudaKeyRanking, KAtTheEndsAndOneKey) {
  KVS_REQUIRE_GPU();
  const int n_heads = 2, n = 300;
  const std::vector<float> rows = random_rows(n_heads, n, n, 7);
  const std::vector<float> lse = {1.0f, 0.0f};
  for (const int k : {n, n + 100, 1, 0, -2}) check_rank(rows, n, lse, n_heads, n, k);
  check_rank(rows, n, lse, n_heads, 1, 1);  // one key: the rows' first column
  check_rank(rows, n, lse, n_heads, 1, 5);
  check_rank(rows, n, lse, n_heads, 2, 1);
  check_rank(rows, n, lse, n_heads, 0, 3);
}

// 40,000 keys: each of the select block's threads scans a segment of 40.
TEST(CudaKeyRanking, KeysOverManySegments) {
  KVS_REQUIRE_GPU();
  const int n_heads = 2, n = 40000;
  const long stride = n;
  std::vector<float> rows = random_rows(n_heads, stride, n, 8);
  for (int j = 0; j < n; j += 3) rows[j] = rows[stride + j] = 0.03125f;  // a long run of equal keys
  const std::vector<float> lse = {0.0f, 0.0f};
  check_rank(rows, stride, lse, n_heads, n, 2681);
  check_rank(rows, stride, lse, n_heads, n, 31000);
}

}  // namespace
}  // namespace kvs::cuda
