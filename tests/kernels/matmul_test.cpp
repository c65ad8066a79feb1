// matvec / matmul / add_bias, row-major and over packed panels, against a naive double-precision
// reference, over shapes that hit every tile remainder (rows and tokens not multiples of 4, cols
// not a multiple of 8, rows past a panel); panel packing and unpacking.
#include <gtest/gtest.h>

#include <algorithm>
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

// W packed in panels.
std::vector<float> packed(const std::vector<float>& w, int rows, int cols) {
  std::vector<float> p(packed_floats(rows, cols), -7.0f);
  pack_panels(p.data(), w.data(), rows, cols);
  return p;
}

TEST(Matmul, PanelsHoldTheRowsAndZerosPastTheLast) {
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 7, 13}, Shape{1, kPanelRows, 5}, Shape{1, 2 * kPanelRows + 3, 30}}) {
    const auto w = random_vec(static_cast<std::size_t>(s.rows) * s.cols, 11, -1.0f, 1.0f);
    const auto p = packed(w, s.rows, s.cols);
    ASSERT_EQ(p.size(), static_cast<std::size_t>((s.rows + kPanelRows - 1) / kPanelRows) * kPanelRows * s.cols);
    std::vector<float> back(w.size(), NAN), row(s.cols, NAN);
    unpack_panels(back.data(), p.data(), s.rows, s.cols);
    EXPECT_EQ(back, w);
    for (int r = 0; r < s.rows; ++r) {
      panel_row(row.data(), p.data(), s.cols, r);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), w.begin() + static_cast<long>(r) * s.cols)) << "row " << r;
    }
    // Column k of the last panel, past W's last row: zeros.
    const int last = static_cast<int>(panel_count(s.rows)) - 1;
    for (int k = 0; k < s.cols; ++k)
      for (int i = s.rows - last * kPanelRows; i < kPanelRows; ++i)
        EXPECT_EQ(p[(static_cast<std::size_t>(last) * s.cols + k) * kPanelRows + i], 0.0f);
  }
}

// Odd and even column counts (the even and odd columns' chains end apart), rows past a panel.
TEST(Matmul, PackedMatvecMatchesNaive) {
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 7, 13}, Shape{1, 64, 64}, Shape{1, 259, 301}, Shape{1, 1024, 768}}) {
    const auto w = random_vec(static_cast<std::size_t>(s.rows) * s.cols, 1, -1.0f, 1.0f);
    const auto x = random_vec(s.cols, 2, -1.0f, 1.0f);
    std::vector<float> y(s.rows + 1, -7.0f);
    matvec_packed(y.data(), packed(w, s.rows, s.cols).data(), x.data(), s.rows, s.cols);
    const auto ref = naive(x, w, 1, s.rows, s.cols);
    for (int r = 0; r < s.rows; ++r) EXPECT_NEAR(y[r], ref[r], 1e-5 * s.cols) << s.rows << "x" << s.cols << " row " << r;
    EXPECT_EQ(y[s.rows], -7.0f) << "written past the last row";
  }
}

// The same micro-tiles over the same panels: packed up front or by matmul, bit for bit.
TEST(Matmul, PackedMatmulEqualsMatmul) {
  for (Shape s : {Shape{1, 5, 9}, Shape{13, 37, 70}, Shape{129, 66, 200}}) {
    const auto w = random_vec(static_cast<std::size_t>(s.rows) * s.cols, 3, -1.0f, 1.0f);
    const auto x = random_vec(static_cast<std::size_t>(s.n) * s.cols, 4, -1.0f, 1.0f);
    std::vector<float> a(static_cast<std::size_t>(s.n) * s.rows), b(a.size());
    matmul(a.data(), x.data(), w.data(), s.n, s.rows, s.cols);
    matmul_packed(b.data(), x.data(), packed(w, s.rows, s.cols).data(), s.n, s.rows, s.cols);
    EXPECT_EQ(a, b) << s.n << " x " << s.rows << " x " << s.cols;
  }
}

TEST(Matmul, MatvecPanelsInAnySplitEqualWholeProducts) {
  const int cols = 101;
  const int rows[] = {37, 5, 300};
  const auto x = random_vec(cols, 7, -1.0f, 1.0f);
  std::vector<std::vector<float>> w, p, whole;
  for (int j = 0; j < 3; ++j) {
    w.push_back(random_vec(static_cast<std::size_t>(rows[j]) * cols, 8 + j, -1.0f, 1.0f));
    p.push_back(packed(w[j], rows[j], cols));
    whole.emplace_back(rows[j]);
    matvec_packed(whole[j].data(), p[j].data(), x.data(), rows[j], cols);
    const auto ref = naive(x, w[j], 1, rows[j], cols);
    for (int r = 0; r < rows[j]; ++r) EXPECT_NEAR(whole[j][r], ref[r], 1e-5 * cols);
  }
  const long n1 = panel_count(rows[0]), n2 = panel_count(rows[1]), total = n1 + n2 + panel_count(rows[2]);
  // Splits whose ranges start and end inside, at and across job boundaries.
  for (const std::vector<long>& cuts : {std::vector<long>{0, total}, std::vector<long>{0, n1, n1 + n2, total},
                                        std::vector<long>{0, 1, n1 + 1, total - 1, total}}) {
    std::vector<std::vector<float>> y = {std::vector<float>(37, NAN), std::vector<float>(5, NAN),
                                         std::vector<float>(300, NAN)};
    const MatvecJob jobs[] = {{y[0].data(), p[0].data(), 37}, {y[1].data(), p[1].data(), 5}, {y[2].data(), p[2].data(), 300}};
    ASSERT_EQ(panel_count(jobs), total);
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) matvec_panels(jobs, x.data(), cols, cuts[i], cuts[i + 1]);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(y[j], whole[j]) << "job " << j;
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
