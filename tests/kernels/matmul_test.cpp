// matvec / matmul / add_bias against a naive double-precision reference, over shapes that hit
// every tile remainder (rows and tokens not multiples of 4, cols not a multiple of 8).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "tests/kernels/random_data.h"

namespace kvs::ops {
namespace {

using test::random_vec;

// Y[n, rows] = X[n, cols] W[rows, cols]^T in double.
std::vector<double> naive(const std::vector<float>& x, const std::vector<float>& w, int n, int rows, int cols) {
  std::vector<double> y(static_cast<std::size_t>(n) * rows);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < rows; ++r) {
      double s = 0;
      for (int k = 0; k < cols; ++k) s += static_cast<double>(x[t * cols + k]) * w[r * cols + k];
      y[t * rows + r] = s;
    }
  return y;
}

struct Shape { int n, rows, cols; };

TEST(Matmul, MatvecMatchesNaive) {
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 7, 13}, Shape{1, 64, 64}, Shape{1, 259, 301}, Shape{1, 1024, 768}}) {
    const auto w = random_vec(static_cast<std::size_t>(s.rows) * s.cols, 1, -1.0f, 1.0f);
    const auto x = random_vec(s.cols, 2, -1.0f, 1.0f);
    std::vector<float> y(s.rows);
    matvec(y.data(), w.data(), x.data(), s.rows, s.cols);
    const auto ref = naive(x, w, 1, s.rows, s.cols);
    for (int r = 0; r < s.rows; ++r) EXPECT_NEAR(y[r], ref[r], 1e-5 * s.cols) << s.rows << "x" << s.cols << " row " << r;
  }
}

TEST(Matmul, BlockedMatmulMatchesNaive) {
  for (Shape s : {Shape{1, 5, 9}, Shape{3, 6, 17}, Shape{4, 8, 8}, Shape{13, 37, 70}, Shape{70, 130, 96}, Shape{129, 66, 200}}) {
    const auto w = random_vec(static_cast<std::size_t>(s.rows) * s.cols, 3, -1.0f, 1.0f);
    const auto x = random_vec(static_cast<std::size_t>(s.n) * s.cols, 4, -1.0f, 1.0f);
    std::vector<float> y(static_cast<std::size_t>(s.n) * s.rows, -7.0f);
    matmul(y.data(), x.data(), w.data(), s.n, s.rows, s.cols);
    const auto ref = naive(x, w, s.n, s.rows, s.cols);
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * s.cols) << "index " << i;
  }
}

// Every token count up to two tiles and one more (tiles are 12 tokens with AVX-512, 6 otherwise):
// each short tile the last tokens of a chunk fall into.
TEST(Matmul, EveryShortTileMatchesNaive) {
  const int rows = 21, cols = 19;
  const auto w = random_vec(static_cast<std::size_t>(rows) * cols, 7, -1.0f, 1.0f);
  for (int n = 1; n <= 25; ++n) {
    const auto x = random_vec(static_cast<std::size_t>(n) * cols, 8 + n, -1.0f, 1.0f);
    std::vector<float> y(static_cast<std::size_t>(n) * rows, -7.0f);
    matmul(y.data(), x.data(), w.data(), n, rows, cols);
    const auto ref = naive(x, w, n, rows, cols);
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 * cols) << n << " tokens, index " << i;
  }
}

// A long input (several token chunks: every panel packed once up front) gives, token for token,
// exactly what one chunk's worth gives (each panel packed as it is taken).
TEST(Matmul, PanelsPackedOnceEqualPanelsPackedPerChunk) {
  const int n = 200, rows = 70, cols = 96, head = 96;
  const auto w = random_vec(static_cast<std::size_t>(rows) * cols, 5, -1.0f, 1.0f);
  const auto x = random_vec(static_cast<std::size_t>(n) * cols, 6, -1.0f, 1.0f);
  std::vector<float> all(static_cast<std::size_t>(n) * rows), first(static_cast<std::size_t>(head) * rows);
  matmul(all.data(), x.data(), w.data(), n, rows, cols);
  matmul(first.data(), x.data(), w.data(), head, rows, cols);
  for (std::size_t i = 0; i < first.size(); ++i) ASSERT_EQ(all[i], first[i]) << "index " << i;
}

TEST(Matmul, MatmulRowsEqualMatvec) {
  const int n = 9, rows = 41, cols = 77;
  const auto w = random_vec(rows * cols, 5, -1.0f, 1.0f);
  const auto x = random_vec(n * cols, 6, -1.0f, 1.0f);
  std::vector<float> y(n * rows), yv(rows);
  matmul(y.data(), x.data(), w.data(), n, rows, cols);
  for (int t = 0; t < n; ++t) {
    matvec(yv.data(), w.data(), x.data() + t * cols, rows, cols);
    for (int r = 0; r < rows; ++r) EXPECT_NEAR(y[t * rows + r], yv[r], 1e-5);
  }
}

TEST(Matmul, MatvecRowsInAnySplitEqualSeparateMatvecs) {
  const int cols = 100;
  const auto x = random_vec(cols, 7, -1.0f, 1.0f);
  const auto w1 = random_vec(37 * cols, 8, -1.0f, 1.0f), w2 = random_vec(5 * cols, 9, -1.0f, 1.0f), w3 = random_vec(300 * cols, 10, -1.0f, 1.0f);
  std::vector<float> r1(37), r2(5), r3(300);
  matvec(r1.data(), w1.data(), x.data(), 37, cols);
  matvec(r2.data(), w2.data(), x.data(), 5, cols);
  matvec(r3.data(), w3.data(), x.data(), 300, cols);
  // Splits whose ranges start and end inside, at and across job boundaries.
  for (const std::vector<long>& cuts : {std::vector<long>{0, 342}, std::vector<long>{0, 37, 42, 342},
                                        std::vector<long>{0, 1, 40, 41, 200, 342}}) {
    std::vector<float> y1(37, NAN), y2(5, NAN), y3(300, NAN);
    const MatvecJob jobs[] = {{y1.data(), w1.data(), 37}, {y2.data(), w2.data(), 5}, {y3.data(), w3.data(), 300}};
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) matvec_rows(jobs, x.data(), cols, cuts[i], cuts[i + 1]);
    EXPECT_EQ(y1, r1);
    EXPECT_EQ(y2, r2);
    EXPECT_EQ(y3, r3);
  }
}

TEST(Matmul, AddBiasAddsToEveryRow) {
  std::vector<float> y = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<float> b = {10, 20, 30};
  add_bias(y.data(), b.data(), 2, 3);
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

}  // namespace
}  // namespace kvs::ops
