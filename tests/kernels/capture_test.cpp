// CPU twins of the prefill-capture reductions (kernels/capture.h) on a small causal example split
// into two prefill blocks: column sums accumulate over the blocks to the full matrix's column
// sums, the window holds the last W rows of the full causal matrix with their lse, and the pooled
// map equals block means of the full matrix recomputed here, its rows summing to 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "kernels/capture.h"
#include "kernels/softmax.h"

namespace kvs::ops {
namespace {

constexpr int kHeads = 2, kP = 6;

// Causal attention probabilities [kHeads, kP, kP] (zeros past the diagonal) and their lse.
struct Causal {
  std::vector<float> probs, lse;
};

Causal causal_example() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  Causal c;
  c.probs.assign(kHeads * kP * kP, 0.0f);
  c.lse.assign(kHeads * kP, 0.0f);
  for (int h = 0; h < kHeads; ++h) {
    for (int q = 0; q < kP; ++q) {
      float* row = c.probs.data() + (h * kP + q) * kP;
      for (int j = 0; j <= q; ++j) row[j] = d(rng);
      c.lse[h * kP + q] = softmax(row, q + 1);
    }
  }
  return c;
}

// Block of queries q0..q0+nq-1 as a prefill block: [kHeads, nq, ld], keys 0..q0+nq-1.
std::vector<float> block_of(const Causal& c, int q0, int nq, long ld, std::vector<float>* lse) {
  std::vector<float> b(kHeads * nq * ld, 99.0f);  // 99 past n_keys: must never be read
  lse->assign(kHeads * nq, 0.0f);
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < nq; ++i) {
      for (int j = 0; j < q0 + nq; ++j) b[(h * nq + i) * ld + j] = c.probs[(h * kP + q0 + i) * kP + j];
      (*lse)[h * nq + i] = c.lse[h * kP + q0 + i];
    }
  }
  return b;
}

TEST(Capture, ColsumAndWindowOverTwoBlocksMatchTheFullMatrix) {
  const Causal c = causal_example();
  const long col_stride = 8, ld = 7;
  const int W = 3;
  std::vector<float> colsum(kHeads * col_stride, 0.0f);
  colsum[kP] = 5.0f;  // past n_keys: untouched
  std::vector<float> window(kHeads * W * kP, -1.0f), wlse(kHeads * W, -1.0f);
  for (const auto& [q0, nq] : {std::pair{0, 4}, std::pair{4, 2}}) {
    std::vector<float> lse;
    const std::vector<float> b = block_of(c, q0, nq, ld, &lse);
    colsum_add(colsum.data(), col_stride, b.data(), kHeads, nq, q0 + nq, ld);
    window_rows(window.data(), wlse.data(), b.data(), lse.data(), kHeads, nq, q0 + nq, ld, q0, kP, W);
  }
  for (int h = 0; h < kHeads; ++h) {
    for (int j = 0; j < kP; ++j) {
      double want = 0;
      for (int q = 0; q < kP; ++q) want += c.probs[(h * kP + q) * kP + j];
      EXPECT_NEAR(colsum[h * col_stride + j], want, 1e-6) << "head " << h << " key " << j;
    }
    for (int w = 0; w < W; ++w) {
      const int q = kP - W + w;
      for (int j = 0; j < kP; ++j) {
        // Row 3 came from the first block (keys 0..3): zeros at keys 4, 5 as in the full matrix.
        EXPECT_EQ(window[(h * W + w) * kP + j], c.probs[(h * kP + q) * kP + j])
            << "head " << h << " window row " << w << " key " << j;
      }
      EXPECT_EQ(wlse[h * W + w], c.lse[h * kP + q]);
    }
  }
  EXPECT_EQ(colsum[kP], 5.0f);
  EXPECT_EQ(colsum[kP + 1], 0.0f);
}

TEST(Capture, WindowIgnoresRowsBeforeIt) {
  const Causal c = causal_example();
  std::vector<float> lse;
  const std::vector<float> b = block_of(c, 0, 2, 3, &lse);
  std::vector<float> window(kHeads * 3 * kP, -1.0f), wlse(kHeads * 3, -1.0f);
  window_rows(window.data(), wlse.data(), b.data(), lse.data(), kHeads, 2, 2, 3, 0, kP, 3);
  for (float x : window) EXPECT_EQ(x, -1.0f);
  for (float x : wlse) EXPECT_EQ(x, -1.0f);
}

TEST(Capture, PoolAddOverBlocksEqualsBlockMeansOfTheFullMatrix) {
  const Causal c = causal_example();
  // block 4 over P = 6: pool rows {0..3} and {4, 5} (a short last block); the prefill blocks
  // {0..2}, {3..5} straddle the pool row boundary.
  const int block = 4, nb = 2;
  const long ld = 9;
  std::vector<float> pooled(kHeads * nb * nb, 0.0f);
  for (const auto& [q0, nq] : {std::pair{0, 3}, std::pair{3, 3}}) {
    std::vector<float> lse;
    const std::vector<float> b = block_of(c, q0, nq, ld, &lse);
    pool_add(pooled.data(), b.data(), kHeads, nq, q0 + nq, ld, q0, kP, block);
  }
  for (int h = 0; h < kHeads; ++h) {
    for (int a = 0; a < nb; ++a) {
      const int q_end = std::min(kP, (a + 1) * block), rows = q_end - a * block;
      double row_sum = 0.0;
      for (int bb = 0; bb < nb; ++bb) {
        double want = 0.0;
        for (int q = a * block; q < q_end; ++q)
          for (int k = bb * block; k < std::min(kP, (bb + 1) * block); ++k) want += c.probs[(h * kP + q) * kP + k];
        want /= rows;
        EXPECT_NEAR(pooled[(h * nb + a) * nb + bb], want, 1e-6) << "head " << h << " cell " << a << "," << bb;
        row_sum += pooled[(h * nb + a) * nb + bb];
      }
      EXPECT_NEAR(row_sum, 1.0, 1e-6) << "head " << h << " pool row " << a;
    }
    EXPECT_EQ(pooled[(h * nb + 0) * nb + 1], 0.0f) << "above the diagonal";
  }
}

TEST(Capture, PoolAddWithBlockOneIsTheMap) {
  const Causal c = causal_example();
  std::vector<float> lse;
  const std::vector<float> b = block_of(c, 0, kP, kP, &lse);
  std::vector<float> pooled(kHeads * kP * kP, 0.0f);
  pool_add(pooled.data(), b.data(), kHeads, kP, kP, kP, 0, kP, 1);
  EXPECT_EQ(pooled, c.probs);
}

}  // namespace
}  // namespace kvs::ops
