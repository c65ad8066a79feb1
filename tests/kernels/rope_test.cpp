// RoPE: frequencies, linear and Llama-3 scaling against direct formulas, YaRN against transformers'
// numbers, the table's scale, the rotation of both pairing conventions, and their equivalence under
// the HF row permutation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "kernels/rope.h"

namespace kvs::ops {
namespace {

TEST(Rope, InverseFrequencies) {
  const auto f = rope_inv_freq(8, 10000.0f);
  ASSERT_EQ(f.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::pow(10000.0, -2.0 * i / 8), 1e-7);
  auto g = f;
  rope_scale_linear(g, 4.0f);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(g[i], f[i] / 4.0f);
}

TEST(Rope, Llama3ScalingFollowsTheThreeBands) {
  // Llama-3.1 settings: head_dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
  const auto base = rope_inv_freq(128, 500000.0f);
  auto f = base;
  rope_scale_llama3(f, 8.0f, 1.0f, 4.0f, 8192);
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / base[i];
    double want;
    if (wavelen < 8192.0 / 4.0) {
      want = base[i];
      ++kept;
    } else if (wavelen > 8192.0 / 1.0) {
      want = base[i] / 8.0;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      want = (1 - smooth) * base[i] / 8.0 + smooth * base[i];
      ++blended;
    }
    EXPECT_NEAR(f[i], want, 1e-6 * want) << "i " << i;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
}

// YaRN against transformers 5.24's _compute_yarn_parameters (head_dim 16, theta 10000, factor 4,
// original context 128): frequency 0 kept, 3 and above divided by 4, 1 and 2 blended (the blend's
// bounds floored and ceiled, 0 and 3); then betas 8 and 2 without truncation (bounds 0.81, 2.02).
TEST(Rope, YarnScalingMatchesTransformers) {
  const std::vector<float> base = rope_inv_freq(16, 10000.0f);
  const std::vector<double> truncated = {1.0,     0.23717081546783447, 0.04999999701976776,    0.007905694656074047,
                                         0.0025,  0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05};
  const std::vector<double> smooth = {1.0,    0.2791745364665985,    0.025996597483754158,  0.007905694656074047,
                                      0.0025, 0.0007905694656074047, 0.0002500000118743628, 7.905694656074047e-05};
  auto f = base;
  rope_scale_yarn(f, 10000.0f, 4.0f, 32.0f, 1.0f, 128, true);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(f[i], truncated[i], 1e-6 * truncated[i]) << i;
  auto g = base;
  rope_scale_yarn(g, 10000.0f, 4.0f, 8.0f, 2.0f, 128, false);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(g[i], smooth[i], 1e-6 * smooth[i]) << i;
  EXPECT_NEAR(yarn_mscale(4.0f), 1.138629436111989, 1e-6);  // transformers' attention factor for factor 4
  EXPECT_EQ(yarn_mscale(1.0f), 1.0f);
  EXPECT_NEAR(yarn_mscale(8.0f, 0.707f), 0.1 * 0.707 * std::log(8.0) + 1, 1e-6);
  // LongRoPE's, for Phi-3.5's 128K over 4K: sqrt(1 + ln 32 / ln 4096)
  EXPECT_NEAR(longrope_mscale(32.0f, 4096), std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-6);
  EXPECT_EQ(longrope_mscale(1.0f, 4096), 1.0f);
}

// A scaled table (YaRN's attention factor) holds scale * cos and scale * sin, over the pairs it scales.
TEST(Rope, ScaledTableScalesCosAndSin) {
  RopeTable plain(rope_inv_freq(8, 10000.0f)), scaled(rope_inv_freq(8, 10000.0f), 1.25f);
  plain.reserve(10);
  scaled.reserve(10);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(scaled.cos(7)[i], 1.25f * plain.cos(7)[i]);
    EXPECT_FLOAT_EQ(scaled.sin(7)[i], 1.25f * plain.sin(7)[i]);
  }
  // A partially rotated head: frequencies past the first two are 0 and stay unscaled (cos 1, sin 0).
  std::vector<float> partial = rope_inv_freq(4, 10000.0f);  // [2]
  partial.resize(4, 0.0f);
  RopeTable half(partial, 1.25f, 2);
  half.reserve(10);
  EXPECT_FLOAT_EQ(half.cos(7)[1], 1.25f * std::cos(7.0f * partial[1]));
  for (int i : {2, 3}) {
    EXPECT_EQ(half.cos(7)[i], 1.0f);
    EXPECT_EQ(half.sin(7)[i], 0.0f);
  }
}

TEST(Rope, TableHoldsCosSinOfEveryPosition) {
  RopeTable t(rope_inv_freq(6, 100.0f));
  t.reserve(5);
  t.reserve(200);  // growth keeps earlier rows
  for (int p : {0, 4, 199}) {
    for (int i = 0; i < 3; ++i) {
      const double a = p * std::pow(100.0, -2.0 * i / 6);
      EXPECT_NEAR(t.cos(p)[i], std::cos(a), 2e-5);
      EXPECT_NEAR(t.sin(p)[i], std::sin(a), 2e-5);
    }
  }
}

TEST(Rope, RotatesPairsOfEachConvention) {
  RopeTable t(rope_inv_freq(4, 10000.0f));
  t.reserve(4);
  const float c0 = t.cos(3)[0], s0 = t.sin(3)[0], c1 = t.cos(3)[1], s1 = t.sin(3)[1];
  std::vector<float> x = {1, 2, 3, 4};
  rope_apply(x.data(), 1, 4, t.cos(3), t.sin(3), RopePairing::Interleaved);  // pairs (0,1), (2,3)
  EXPECT_FLOAT_EQ(x[0], 1 * c0 - 2 * s0);
  EXPECT_FLOAT_EQ(x[1], 1 * s0 + 2 * c0);
  EXPECT_FLOAT_EQ(x[2], 3 * c1 - 4 * s1);
  EXPECT_FLOAT_EQ(x[3], 3 * s1 + 4 * c1);
  std::vector<float> y = {1, 2, 3, 4};
  rope_apply(y.data(), 1, 4, t.cos(3), t.sin(3), RopePairing::RotateHalf);  // pairs (0,2), (1,3)
  EXPECT_FLOAT_EQ(y[0], 1 * c0 - 3 * s0);
  EXPECT_FLOAT_EQ(y[2], 1 * s0 + 3 * c0);
  EXPECT_FLOAT_EQ(y[1], 2 * c1 - 4 * s1);
  EXPECT_FLOAT_EQ(y[3], 2 * s1 + 4 * c1);
}

TEST(Rope, ConventionsAgreeUnderTheHfPermutation) {
  // Interleaved element 2i + c sits at c * d/2 + i in the HF layout; rotating either way and
  // permuting gives the same vector, for several heads at once.
  const int heads = 3, d = 16, half = d / 2;
  RopeTable t(rope_inv_freq(d, 10000.0f));
  t.reserve(50);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> inter(heads * d), hf(heads * d);
  for (float& v : inter) v = u(rng);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < half; ++i)
      for (int c = 0; c < 2; ++c) hf[h * d + c * half + i] = inter[h * d + 2 * i + c];
  rope_apply(inter.data(), heads, d, t.cos(37), t.sin(37), RopePairing::Interleaved);
  rope_apply(hf.data(), heads, d, t.cos(37), t.sin(37), RopePairing::RotateHalf);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < half; ++i)
      for (int c = 0; c < 2; ++c) EXPECT_FLOAT_EQ(hf[h * d + c * half + i], inter[h * d + 2 * i + c]);
}

TEST(Rope, DotProductDependsOnRelativePositionOnly) {
  const int d = 8;
  RopeTable t(rope_inv_freq(d, 10000.0f));
  t.reserve(40);
  const std::vector<float> q0 = {0.3f, -1, 0.5f, 2, -0.7f, 0.1f, 1.2f, -0.4f};
  const std::vector<float> k0 = {1, 0.2f, -0.3f, 0.8f, 0.6f, -1.1f, 0.9f, 0.05f};
  auto score = [&](int pq, int pk) {
    auto q = q0, k = k0;
    rope_apply(q.data(), 1, d, t.cos(pq), t.sin(pq), RopePairing::Interleaved);
    rope_apply(k.data(), 1, d, t.cos(pk), t.sin(pk), RopePairing::Interleaved);
    float s = 0;
    for (int i = 0; i < d; ++i) s += q[i] * k[i];
    return s;
  };
  EXPECT_NEAR(score(10, 7), score(3, 0), 1e-5);
  EXPECT_NEAR(score(35, 30), score(5, 0), 1e-5);
}

}  // namespace
}  // namespace kvs::ops
