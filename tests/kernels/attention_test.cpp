// attend / attend_rows: one query row over strided or listed key/value rows, against a direct
// double-precision computation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace kvs::ops {
namespace {

std::vector<float> random_vec(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.5f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Expected {
  std::vector<double> probs, out;
  double lse = 0;
};

Expected naive(const float* q, const float* k, const float* v, const std::vector<int>& rows, int hd, long stride, double scale) {
  Expected e;
  std::vector<double> s;
  double mx = -1e300;
  for (int r : rows) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * k[r * stride + i];
    s.push_back(d * scale);
    mx = std::max(mx, s.back());
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - mx);
  e.lse = mx + std::log(sum);
  e.out.assign(hd, 0.0);
  for (std::size_t j = 0; j < rows.size(); ++j) {
    e.probs.push_back(std::exp(s[j] - e.lse));
    for (int i = 0; i < hd; ++i) e.out[i] += e.probs[j] * v[rows[j] * stride + i];
  }
  return e;
}

TEST(Attention, StridedRowsMatchNaive) {
  const int hd = 16, n = 23, heads = 3;
  const long stride = heads * hd;  // keys of head 1 inside [n, heads * hd] rows
  const auto k = random_vec(n * stride, 1), v = random_vec(n * stride, 2), q = random_vec(hd, 3);
  std::vector<float> out(hd), probs(n);
  const float scale = 1.0f / 4.0f;
  const float lse = attend(out.data(), probs.data(), q.data(), k.data() + hd, v.data() + hd, n, hd, stride, scale);
  std::vector<int> rows(n);
  for (int j = 0; j < n; ++j) rows[j] = j;
  const Expected e = naive(q.data(), k.data() + hd, v.data() + hd, rows, hd, stride, scale);
  EXPECT_NEAR(lse, e.lse, 1e-5);
  for (int j = 0; j < n; ++j) EXPECT_NEAR(probs[j], e.probs[j], 1e-6);
  for (int i = 0; i < hd; ++i) EXPECT_NEAR(out[i], e.out[i], 1e-5);
}

TEST(Attention, ListedRowsReadOnlyThoseRows) {
  const int hd = 8, n = 30;
  const auto k = random_vec(n * hd, 4), v = random_vec(n * hd, 5), q = random_vec(hd, 6);
  const std::vector<int32_t> rows = {0, 3, 4, 17, 29};
  std::vector<float> out(hd), probs(rows.size());
  const float lse = attend_rows(out.data(), probs.data(), q.data(), k.data(), v.data(), rows.data(),
                                static_cast<int>(rows.size()), hd, 0.5f);
  const Expected e = naive(q.data(), k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()), hd, hd, 0.5);
  EXPECT_NEAR(lse, e.lse, 1e-5);
  for (std::size_t j = 0; j < rows.size(); ++j) EXPECT_NEAR(probs[j], e.probs[j], 1e-6);
  for (int i = 0; i < hd; ++i) EXPECT_NEAR(out[i], e.out[i], 1e-5);
}

}  // namespace
}  // namespace kvs::ops
