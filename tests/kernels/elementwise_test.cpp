// rmsnorm, softmax (with its log-sum-exp), swiglu, soft-capping and the vector log against direct
// double-precision formulas; the 16-lane exponential against the 8-lane one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "kernels/exp8.h"
#include "kernels/log8.h"
#include "kernels/rmsnorm.h"
#include "kernels/softcap.h"
#include "kernels/softmax.h"
#include "kernels/swiglu.h"
#include "tests/kernels/random_data.h"

namespace kvs::ops {
namespace {

using test::random_vec;

// log8 over every binade of positive normal floats, both sides of the sqrt(1/2) split, and
// values next to 1 (where the absolute error matters): within 2e-7 of log in double, absolute
// below |log x| = 1, relative above.
TEST(Elementwise, Log8MatchesLogAcrossTheNormalRange) {
  std::vector<float> xs = {std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), 1.0f,
                           std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f), 0.70710677f, 0.70710683f,
                           2.0f, 0.5f, 1e-30f, 3e38f};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int e = -126; e <= 127; ++e)
    for (int i = 0; i < 64; ++i) xs.push_back(std::ldexp(mant(rng), e));
  for (const float x : random_vec(4096, 6, 0.9f, 1.1f)) xs.push_back(x);
  while (xs.size() % 8) xs.push_back(1.5f);
  for (std::size_t i = 0; i < xs.size(); i += 8) {
    f32x8 v;
    for (int k = 0; k < 8; ++k) v[k] = xs[i + k];
    const f32x8 got = log8(v);
    for (int k = 0; k < 8; ++k) {
      const double want = std::log(static_cast<double>(xs[i + k]));
      const double err = std::fabs(got[k] - want) / std::max(1.0, std::fabs(want));
      ASSERT_LE(err, 2e-7) << "log8(" << xs[i + k] << ") = " << got[k] << ", log = " << want;
    }
  }
}

TEST(Elementwise, RmsnormMatchesFormula) {
  const int n = 3, dim = 67;
  const auto x = random_vec(n * dim, 1, -2, 2), w = random_vec(dim, 2, 0.5f, 1.5f);
  std::vector<float> y(n * dim), y1(dim);
  rmsnorm_rows(y.data(), x.data(), w.data(), n, dim, 1e-5f);
  for (int t = 0; t < n; ++t) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[t * dim + i]) * x[t * dim + i];
    const double s = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[t * dim + i], x[t * dim + i] * s * w[i], 1e-5);
  }
  rmsnorm(y1.data(), x.data(), w.data(), dim, 1e-5f);
  for (int i = 0; i < dim; ++i) EXPECT_EQ(y1[i], y[i]);
}

TEST(Elementwise, SoftmaxIsStableAndReturnsLse) {
  auto x = random_vec(301, 3, -20, 20);
  x[17] = 1000.0f;  // would overflow exp without the max subtraction
  const auto in = x;
  const float lse = softmax(x.data(), static_cast<int>(x.size()));
  double mx = -1e300;
  for (float v : in) mx = std::max<double>(mx, v);
  double sum = 0;
  for (float v : in) sum += std::exp(v - mx);
  EXPECT_NEAR(lse, mx + std::log(sum), 1e-3);
  double total = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], std::exp(in[i] - mx) / sum, 1e-6);
    total += x[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  float one = -3.0f;
  EXPECT_FLOAT_EQ(softmax(&one, 1), -3.0f);
  EXPECT_FLOAT_EQ(one, 1.0f);
}

// The vectorized exponential, through softmax: every probability within 1e-6 of its own size plus
// what rounding x - max to fp32 costs (half an ulp of the argument, relative to exp of it): a
// relative bound, not an absolute one that tiny probabilities pass trivially. Over lengths
// with and without a partial vector of 8 or 16 lanes, spreads from flat to one-hot, and keys at -inf (exactly 0).
TEST(Elementwise, SoftmaxProbabilitiesHaveSmallRelativeError) {
  for (const int n : {1, 7, 8, 9, 15, 16, 17, 64, 301}) {
    for (const float spread : {0.5f, 10.0f, 60.0f, 200.0f}) {
      auto x = random_vec(n, 10 + n, -spread, spread);
      if (n > 2) x[1] = -std::numeric_limits<float>::infinity();
      const auto in = x;
      const float lse = softmax(x.data(), n);
      double mx = -1e300, sum = 0.0;
      for (float v : in) mx = std::max<double>(mx, v);
      for (float v : in) sum += std::exp(double(v) - mx);
      SCOPED_TRACE("n " + std::to_string(n) + ", spread " + std::to_string(spread));
      EXPECT_NEAR(lse, mx + std::log(sum), 2e-6 * std::max(1.0, std::abs(mx)));
      for (int i = 0; i < n; ++i) {
        const double want = std::exp(double(in[i]) - mx) / sum;
        const double arg_rounding = std::abs(double(in[i]) - mx) * 0x1p-24;
        if (want < 1e-36) {  // at or under FLT_MIN: rounds to 0 or loses bits as a denormal
          EXPECT_NEAR(x[i], want, 1e-37) << "element " << i;
        } else {
          EXPECT_NEAR(x[i], want, (1e-6 + arg_rounding) * want) << "element " << i;
        }
      }
      if (n > 2) {
        EXPECT_EQ(x[1], 0.0f);
      }
    }
  }
}

// The exponential of 16 lanes is the 8-lane one lane for lane (softmax takes 16 with AVX-512),
// across the clamps, -inf, +inf and NaN.
TEST(Elementwise, SixteenLaneExpEqualsEightLaneExp) {
  std::vector<float> xs = random_vec(4096, 12, -100.0f, 100.0f);
  for (const float x : {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), -87.33654f, 88.37626f, 0.0f, -0.0f, 1e-30f})
    xs.push_back(x);
  while (xs.size() % 16) xs.push_back(0.5f);
  for (std::size_t i = 0; i < xs.size(); i += 16) {
    f32x16 v16;
    f32x8 lo, hi;
    for (int k = 0; k < 16; ++k) v16[k] = xs[i + k];
    for (int k = 0; k < 8; ++k) lo[k] = xs[i + k], hi[k] = xs[i + 8 + k];
    const f32x16 got = exp_lanes(v16);
    const f32x8 want_lo = exp8(lo), want_hi = exp8(hi);
    for (int k = 0; k < 16; ++k) {
      const float want = k < 8 ? want_lo[k] : want_hi[k - 8];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[k])) << xs[i + k];
      } else {
        EXPECT_EQ(got[k], want) << "exp(" << xs[i + k] << ")";
      }
    }
  }
}

TEST(Elementwise, SwigluIsSiluTimesUp) {
  auto g = random_vec(1000, 4, -8, 8);
  const auto u = random_vec(1000, 5, -2, 2);
  const auto g0 = g;
  swiglu(g.data(), u.data(), static_cast<long>(g.size()));
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(g[i], g0[i] / (1.0 + std::exp(-double(g0[i]))) * u[i], 1e-5);
  }
}

// PyTorch's gelu(approximate="tanh") in double, times up; large |x| (exp8's clamped range) too.
TEST(Elementwise, GegluIsTanhGeluTimesUp) {
  auto g = random_vec(1000, 6, -12, 12);
  const auto u = random_vec(1000, 7, -2, 2);
  g[0] = -100.0f;
  g[1] = 100.0f;
  const auto g0 = g;
  geglu_tanh(g.data(), u.data(), static_cast<long>(g.size()));
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double x = g0[i];
    const double gelu = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(g[i], gelu * u[i], 1e-5 * std::max(1.0, std::fabs(gelu * u[i]))) << x;
  }
}

// The vector tanh under softcap (cap 1: tanh itself) within 3e-7 relative of tanh in double, on
// both sides of its switch at 0.55, near 0, and where it saturates; odd; NaN stays NaN.
TEST(Elementwise, SoftcapTanhIsAccurateAcrossTheRange) {
  std::vector<float> xs = {0.0f, 1e-30f, 1e-7f, 0.1f, 0.5499999f, 0.55f, 0.5500001f, 1.0f, 3.0f, 9.0f, 20.0f, 100.0f,
                           std::numeric_limits<float>::infinity()};
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (int i = 0; i < 20000; ++i) xs.push_back(d(rng) * (i % 2 ? 0.6f : 12.0f));
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  std::vector<float> y = xs;
  softcap(y.data(), static_cast<long>(y.size()), 1.0f);
  double worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = std::tanh(static_cast<double>(xs[i]));
    worst = std::max(worst, want == 0 ? std::fabs(y[i]) : std::fabs(y[i] - want) / std::fabs(want));
    EXPECT_EQ(y[i], -y[i < n ? i + n : i - n]) << xs[i];
  }
  EXPECT_LT(worst, 3e-7);
  float nan = std::numeric_limits<float>::quiet_NaN();
  softcap(&nan, 1, 1.0f);
  EXPECT_TRUE(std::isnan(nan));
}

// cap * tanh(x / cap) in double, within an ulp or two; bounded by the cap; a cap of 0 changes
// nothing; Scoring scales, then caps (the same bits as the two steps apart).
TEST(Elementwise, SoftcapIsCapTimesTanh) {
  auto x = random_vec(1000, 8, -200, 200);
  const auto x0 = x;
  softcap(x.data(), static_cast<long>(x.size()), 30.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], 30.0 * std::tanh(x0[i] / 30.0), 4e-6 * 30.0) << x0[i];
    EXPECT_LE(std::fabs(x[i]), 30.0f);
  }
  auto y = x0;
  softcap(y.data(), static_cast<long>(y.size()), 0.0f);
  EXPECT_EQ(y, x0);
  const Scoring score(0.125f, 50.0f);
  y = x0;
  score.apply(y.data(), static_cast<long>(y.size()));
  std::vector<float> steps = x0;
  for (float& v : steps) v *= 0.125f;
  softcap(steps.data(), static_cast<long>(steps.size()), 50.0f);
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], steps[i]);
    EXPECT_NEAR(y[i], 50.0 * std::tanh(x0[i] * 0.125 / 50.0), 4e-6 * 50.0);
  }
}

}  // namespace
}  // namespace kvs::ops
