// attend_gathered_block (a block of queries over gathered keys, each up to its own position and
// within its window) against a direct double-precision computation, scores soft-capped too.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/attention_gathered.h"
#include "tests/kernels/random_data.h"

namespace kvs::ops {
namespace {

using test::random_vec;

// Keys at positions with gaps (entries evicted or inactive before the block), then the block's
// own n_q positions q_pos0..q_pos0+n_q-1; each case checked with and without a window; scores
// soft-capped by softcap (0: not).
void check(int n_q, int n_old, int head_dim, int window, float softcap = 0.0f) {
  SCOPED_TRACE("n_q " + std::to_string(n_q) + " old keys " + std::to_string(n_old) + " hd " +
               std::to_string(head_dim) + " window " + std::to_string(window) + " softcap " + std::to_string(softcap));
  std::vector<int32_t> pos;
  for (int j = 0; j < n_old; ++j) pos.push_back(3 * j + (j % 2));  // ascending, with gaps
  const int q_pos0 = n_old == 0 ? 0 : pos.back() + 5;
  for (int i = 0; i < n_q; ++i) pos.push_back(q_pos0 + i);
  const int n_keys = static_cast<int>(pos.size());
  const long q_stride = head_dim + 3, out_stride = head_dim + 5;  // rows inside wider ones
  const std::vector<float> q = random_vec(n_q * q_stride, 1, -1.5f, 1.5f), k = random_vec(n_keys * head_dim, 2, -1.5f, 1.5f),
                           v = random_vec(n_keys * head_dim, 3, -1.5f, 1.5f);
  std::vector<float> vt(v.size());  // [head_dim, n_keys]
  for (int j = 0; j < n_keys; ++j)
    for (int t = 0; t < head_dim; ++t) vt[t * n_keys + j] = v[j * head_dim + t];
  std::vector<float> out(n_q * out_stride, 7.0f), probs(static_cast<std::size_t>(n_q) * n_keys, 9.0f), lse(n_q);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  attend_gathered_block(out.data(), out_stride, probs.data(), lse.data(), q.data(), q_stride, n_q, q_pos0, k.data(),
                        vt.data(), pos.data(), n_keys, head_dim, window, Scoring(scale, softcap));
  for (int i = 0; i < n_q; ++i) {
    const int p = q_pos0 + i;
    std::vector<double> s(n_keys, 0.0);
    double mx = -1e300, sum = 0, row_sum = 0;
    for (int j = 0; j < n_keys; ++j) {
      if (pos[j] > p || (window > 0 && pos[j] <= p - window)) continue;
      double d = 0;
      for (int t = 0; t < head_dim; ++t) d += double(q[i * q_stride + t]) * k[j * head_dim + t];
      s[j] = softcap > 0 ? softcap * std::tanh(d * scale / softcap) : d * scale;
      mx = std::max(mx, s[j]);
    }
    for (int j = 0; j < n_keys; ++j)
      if (!(pos[j] > p || (window > 0 && pos[j] <= p - window))) sum += std::exp(s[j] - mx);
    for (int j = 0; j < n_keys; ++j) {
      const bool read = !(pos[j] > p || (window > 0 && pos[j] <= p - window));
      const double want = read ? std::exp(s[j] - mx) / sum : 0.0;
      EXPECT_NEAR(probs[i * n_keys + j], want, 1e-6) << "row " << i << " key " << j;
      if (!read) {
        EXPECT_EQ(probs[i * n_keys + j], 0.0f) << "row " << i << " key " << j;
      }
      row_sum += probs[i * n_keys + j];
    }
    EXPECT_NEAR(row_sum, 1.0, 1e-5) << "row " << i;
    EXPECT_NEAR(lse[i], mx + std::log(sum), 1e-4) << "row " << i;
    for (int t = 0; t < head_dim; ++t) {
      double o = 0;
      for (int j = 0; j < n_keys; ++j) o += double(probs[i * n_keys + j]) * v[j * head_dim + t];
      EXPECT_NEAR(out[i * out_stride + t], o, 1e-5) << "row " << i << " dim " << t;
    }
    for (long t = head_dim; t < out_stride; ++t) EXPECT_EQ(out[i * out_stride + t], 7.0f) << "padding written";
  }
}

TEST(AttentionGathered, MatchesDirectComputation) {
  check(1, 0, 8, 0);     // one query, its own key only
  check(5, 0, 16, 0);    // a block with no cache before it: causal
  check(17, 40, 64, 0);  // keys with gaps before the block
  check(33, 150, 64, 0);
  check(40, 100, 128, 0);
  check(9, 30, 64, 12);  // a sliding window cuts old keys and, for later rows, the block's own
  check(30, 8, 32, 4);
  check(200, 400, 64, 0);  // rows x keys past 65,536: the softmax rows on the OpenMP threads
  check(256, 300, 64, 150);
  check(17, 40, 64, 0, 1.5f);  // Gemma 2's soft-capped scores
  check(30, 8, 32, 4, 1.5f);
}

TEST(AttentionGathered, AQueryWithNoKeyIsRefused) {
  const std::vector<int32_t> pos = {10, 11};  // the block at position 3 has no key at or before it
  std::vector<float> q(4, 1.0f), kv(8, 1.0f), out(4), probs(2), lse(1);
  EXPECT_THROW(attend_gathered_block(out.data(), 4, probs.data(), lse.data(), q.data(), 4, 1, 3, kv.data(), kv.data(),
                                     pos.data(), 2, 4, 0, 0.5f),
               std::logic_error);
}

}  // namespace
}  // namespace kvs::ops
