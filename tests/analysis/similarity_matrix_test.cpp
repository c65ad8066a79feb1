// Inter-layer similarity (OmniKV definition) on hand-built decode rows with known values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "analysis/similarity.h"
#include "inference/errors.h"

namespace kvs {
namespace {

TEST(SimilarityTest, DefaultKIsSixPointSevenPercentClamped) {
  EXPECT_EQ(default_similarity_k(1), 1);
  EXPECT_EQ(default_similarity_k(10), 1);
  EXPECT_EQ(default_similarity_k(100), 7);   // round(6.7)
  EXPECT_EQ(default_similarity_k(1000), 67);
}

TEST(SimilarityTest, TopKBreaksTiesByLowerPosition) {
  std::vector<float> a = {0.1f, 0.3f, 0.3f, 0.2f, 0.1f};
  EXPECT_EQ(top_k_positions(a, 3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(top_k_positions(a, 5), (std::vector<int>{1, 2, 3, 0, 4}));
  EXPECT_EQ(top_k_positions(a, 9).size(), 5u);
}

// The selected set and its order equal a full ranking by (value descending, position ascending),
// on values drawn from a few levels so that ties straddle the k-th place.
TEST(SimilarityTest, TopKEqualsAFullRanking) {
  std::mt19937 rng(3);
  for (int n : {1, 2, 17, 300, 3574}) {
    std::uniform_int_distribution<int> level(0, n > 100 ? 40 : 3);
    std::vector<float> a(n);
    for (float& v : a) v = 0.01f * static_cast<float>(level(rng));
    std::vector<int> ranked(n);
    std::iota(ranked.begin(), ranked.end(), 0);
    std::stable_sort(ranked.begin(), ranked.end(), [&](int x, int y) { return a[x] > a[y]; });
    for (int k : {0, 1, n / 3, n / 2 + 1, n - 1, n}) {
      const std::vector<int> want(ranked.begin(), ranked.begin() + std::max(k, 0));
      EXPECT_EQ(top_k_positions(a, k), want) << "n = " << n << ", k = " << k;
    }
  }
}

// The same over attention-like values spread across many magnitudes (the selection's buckets
// are the float's top bits), with repeated values; then with zeros, some of them -0 (the same
// value as 0, whose bits are the largest); then with negative values too.
TEST(SimilarityTest, TopKEqualsAFullRankingAcrossMagnitudesAndSigns) {
  std::mt19937 rng(5);
  for (const char* kind : {"positive", "with -0", "signed"}) {
    const bool zeros = std::string(kind) != "positive", negatives = std::string(kind) == "signed";
    for (int n : {5, 300, 3574}) {
      std::uniform_real_distribution<float> mag(-9.0f, 0.0f);
      std::uniform_int_distribution<int> pick(0, 9);
      std::vector<float> a(n);
      for (float& v : a) {
        v = std::pow(10.0f, mag(rng));
        if (pick(rng) == 0) v = 0.125f;  // ties across the k-th place
        if (negatives && pick(rng) < 3) v = -v;
        if (zeros && pick(rng) < 2) v = pick(rng) < 5 ? -0.0f : 0.0f;
      }
      std::vector<int> ranked(n);
      std::iota(ranked.begin(), ranked.end(), 0);
      std::stable_sort(ranked.begin(), ranked.end(), [&](int x, int y) { return a[x] > a[y]; });
      for (int k : {1, 2, n / 10 + 1, n / 2, n - 1, n}) {
        const std::vector<int> want(ranked.begin(), ranked.begin() + k);
        EXPECT_EQ(top_k_positions(a, k), want) << "n = " << n << ", k = " << k << ", " << kind;
      }
    }
  }
}

TEST(SimilarityTest, HeadMaxUsesLogitsNotProbabilities) {
  // Two heads over P=2 prompt keys (row length 3, the third key is the query itself).
  // Head 0: p = (0.5, 0.25, 0.25), lse 0 -> z = (log .5, log .25)
  // Head 1: p = (0.1, 0.8, 0.1), lse = log 2 -> z = (log .2, log 1.6)
  std::vector<float> rows = {0.5f, 0.25f, 0.25f, 0.1f, 0.8f, 0.1f};
  std::vector<float> lse = {0.0f, std::log(2.0f)};
  std::vector<float> a = head_max_attention(rows, lse, 2, 3, 2);
  // m = (log .5, log 1.6) -> softmax = (.5, 1.6) / 2.1
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NEAR(a[0], 0.5 / 2.1, 1e-6);
  EXPECT_NEAR(a[1], 1.6 / 2.1, 1e-6);
}

TEST(SimilarityTest, ZeroProbabilityIsMinusInfinity) {
  std::vector<float> rows = {0.0f, 1.0f, 0.0f};  // one head, P = 3
  std::vector<float> lse = {2.0f};
  std::vector<float> a = head_max_attention(rows, lse, 1, 3, 3);
  EXPECT_EQ(a, (std::vector<float>{0.0f, 1.0f, 0.0f}));
  std::vector<float> none = {0.0f, 0.0f, 1.0f};  // all prompt keys zero
  EXPECT_EQ(head_max_attention(none, lse, 1, 3, 2), (std::vector<float>{0.0f, 0.0f}));
}

// Three layers, one head, P = 4, row length 5; lse 0 so a_l = the row's prompt part renormalized.
std::vector<float> three_layer_rows() {
  return {
      0.4f, 0.3f, 0.1f, 0.1f, 0.1f,    // layer 0
      0.4f, 0.3f, 0.1f, 0.1f, 0.1f,    // layer 1: identical to layer 0
      0.05f, 0.05f, 0.6f, 0.2f, 0.1f,  // layer 2
  };
}

TEST(SimilarityTest, IdenticalLayersAndKnownValues) {
  std::vector<float> rows = three_layer_rows();
  std::vector<float> lse(3, 0.0f);
  std::vector<float> sim = step_similarity(rows, lse, 3, 1, 5, 4, 2);
  // a0 = a1 = (.4,.3,.1,.1)/.9, a2 = (.05,.05,.6,.2)/.9; Top2(a0) = {0,1}; Top2(a2) = {2,3}.
  auto at = [&](int i, int j) { return sim[i * 3 + j]; };
  EXPECT_NEAR(at(0, 0), 0.7 / 0.9, 1e-6);
  EXPECT_NEAR(at(0, 1), at(0, 0), 1e-7);  // identical rows: same mass
  EXPECT_NEAR(at(1, 0), at(1, 1), 1e-7);
  EXPECT_NEAR(at(0, 2), 0.1 / 0.9, 1e-6);
  EXPECT_NEAR(at(2, 0), 0.2 / 0.9, 1e-6);  // l1 > l2 uses the same formula
  EXPECT_NEAR(at(2, 2), 0.8 / 0.9, 1e-6);
  // With K = P every layer's top-K covers all of every layer's mass.
  std::vector<float> all = step_similarity(rows, lse, 3, 1, 5, 4, 4);
  for (float v : all) EXPECT_NEAR(v, 1.0f, 1e-6);
}

TEST(SimilarityTest, IdenticalRowsGiveOneAtKEqualsSupport) {
  // All mass of both layers on key 1: sim = 1 everywhere at K = 1.
  std::vector<float> rows = {0.0f, 1.0f, 0.0f, 0.0f, 1.0f, 0.0f};
  std::vector<float> lse = {0.5f, -1.0f};
  std::vector<float> sim = step_similarity(rows, lse, 2, 1, 3, 2, 1);
  EXPECT_EQ(sim, (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}));
}

TEST(SimilarityTest, MeanOverStepsAndPerStep) {
  std::vector<float> step0 = three_layer_rows();
  std::vector<float> step1 = {
      0.05f, 0.05f, 0.6f, 0.2f, 0.1f,
      0.4f, 0.3f, 0.1f, 0.1f, 0.1f,
      0.4f, 0.3f, 0.1f, 0.1f, 0.1f,
  };
  std::vector<float> rows = step0;
  rows.insert(rows.end(), step1.begin(), step1.end());
  std::vector<float> lse(6, 0.0f);
  SimilarityResult r = similarity_from_rows(rows, lse, 2, 3, 1, 5, 4, 2);
  ASSERT_EQ(r.n_steps, 2);
  ASSERT_EQ(r.per_step.size(), 18u);
  ASSERT_EQ(r.k, 2);
  std::vector<float> s0 = step_similarity(step0, std::vector<float>(3, 0.0f), 3, 1, 5, 4, 2);
  std::vector<float> s1 = step_similarity(step1, std::vector<float>(3, 0.0f), 3, 1, 5, 4, 2);
  for (int i = 0; i < 9; ++i) {
    EXPECT_FLOAT_EQ(r.per_step[i], s0[i]);
    EXPECT_FLOAT_EQ(r.per_step[9 + i], s1[i]);
    EXPECT_NEAR(r.mean[i], 0.5f * (s0[i] + s1[i]), 1e-7);
  }
  // Default K for P = 4 is 1.
  EXPECT_EQ(similarity_from_rows(rows, lse, 2, 3, 1, 5, 4).k, 1);
}

TEST(SimilarityTest, BadShapesAreInputErrors) {
  std::vector<float> rows(15), lse(3);
  EXPECT_THROW(similarity_from_rows(rows, lse, 0, 3, 1, 5, 4), InputError);
  EXPECT_THROW(similarity_from_rows(rows, lse, 1, 3, 1, 5, 6), InputError);
  EXPECT_THROW(similarity_from_rows(rows, lse, 2, 3, 1, 5, 4), InputError);
}

}  // namespace
}  // namespace kvs
