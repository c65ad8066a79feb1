// Filter-layer optimizer: the dynamic program equals a brute-force search over all k-subsets;
// the breakdown of a given choice follows OmniKV's layer roles.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "analysis/filter_layers.h"
#include "inference/errors.h"

namespace kvs {
namespace {

std::vector<float> random_sim(int L, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> sim((size_t)L * L);
  for (float& v : sim) v = u(rng);
  return sim;
}

// Best objective over all k-subsets, by enumerating bitmasks.
double brute_force_best(const std::vector<float>& sim, int L, int k, int wait) {
  double best = -1.0;
  for (unsigned mask = 0; mask < (1u << L); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    std::vector<int> f;
    for (int i = 0; i < L; ++i) if (mask & (1u << i)) f.push_back(i);
    best = std::max(best, evaluate_filter_layers(sim, L, f, wait).retained);
  }
  return best;
}

// Objective written out independently of the library: walk the layers, track the active filter.
double direct_objective(const std::vector<float>& sim, int L, const std::vector<int>& f, int wait) {
  double total = 0.0;
  int active = -1;
  for (int j = 0; j < L; ++j) {
    bool is_filter = false;
    for (int x : f) is_filter |= (x == j);
    if (is_filter) { active = j; continue; }
    if (active < 0 || j <= active + wait) continue;
    total += sim[(size_t)active * L + j];
  }
  return total;
}

TEST(FilterLayersTest, DynamicProgramEqualsBruteForce) {
  std::mt19937 rng(1234);
  for (int L = 8; L <= 10; ++L) {
    for (int k = 1; k <= 3; ++k) {
      for (int wait = 0; wait <= 1; ++wait) {
        for (int trial = 0; trial < 5; ++trial) {
          std::vector<float> sim = random_sim(L, rng);
          FilterPlan plan = optimize_filter_layers(sim, L, k, wait);
          ASSERT_EQ((int)plan.filters.size(), k);
          const double brute = brute_force_best(sim, L, k, wait);
          EXPECT_NEAR(plan.retained, brute, 1e-9) << "L=" << L << " k=" << k << " wait=" << wait;
          EXPECT_NEAR(direct_objective(sim, L, plan.filters, wait), plan.retained, 1e-9);
        }
      }
    }
  }
}

TEST(FilterLayersTest, OmniKVExampleRoles) {
  // Llama-3-8B example of POLICIES.md §9: F = {2, 8, 18}, wait 1, 32 layers.
  const int L = 32;
  std::vector<float> sim((size_t)L * L, 0.75f);
  FilterPlan plan = evaluate_filter_layers(sim, L, parse_filter_layers("18,2,8", L), 1);
  EXPECT_EQ(plan.filters, (std::vector<int>{2, 8, 18}));
  for (int d : {0, 1, 3, 9, 19}) EXPECT_NE(plan.roles[d], LayerRole::Sparse) << d;
  EXPECT_EQ(plan.roles[0], LayerRole::Dense);
  EXPECT_EQ(plan.roles[2], LayerRole::Filter);
  EXPECT_EQ(plan.roles[3], LayerRole::Wait);
  for (int j = 4; j <= 7; ++j) EXPECT_EQ(plan.source[j], 2);
  for (int j = 10; j <= 17; ++j) EXPECT_EQ(plan.source[j], 8);
  for (int j = 20; j <= 31; ++j) EXPECT_EQ(plan.source[j], 18);
  EXPECT_EQ(plan.segment_layers, (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(plan.n_sparse, 24);
  EXPECT_NEAR(plan.retained, 24 * 0.75, 1e-5);
  EXPECT_NEAR(plan.lost, 24 * 0.25, 1e-5);
  EXPECT_NEAR(plan.segment_retained[1], 8 * 0.75, 1e-5);
}

TEST(FilterLayersTest, HandWorkedOptimum) {
  // L = 4, wait 0, k = 1: filter f retains sum_{j>f} sim(f, j).
  std::vector<float> sim = {
      1.0f, 0.1f, 0.1f, 0.1f,   // f=0: 0.3
      0.0f, 1.0f, 0.9f, 0.9f,   // f=1: 1.8
      0.0f, 0.0f, 1.0f, 0.2f,   // f=2: 0.2
      0.0f, 0.0f, 0.0f, 1.0f,   // f=3: 0
  };
  FilterPlan plan = optimize_filter_layers(sim, 4, 1, 0);
  EXPECT_EQ(plan.filters, (std::vector<int>{1}));
  EXPECT_NEAR(plan.retained, 1.8, 1e-6);
  EXPECT_NEAR(plan.lost, 0.2, 1e-6);
  // k = 2: {0, 1} gives 0 + 1.8 = 1.8; {1, 2}: 0 + 0.2; {0, 2}: 0.1 + 0.2 ... best stays 1.8.
  EXPECT_NEAR(optimize_filter_layers(sim, 4, 2, 0).retained, 1.8, 1e-6);
  // ... with filter 0 serving no sparse layer (layer 1 is the next filter): said so.
  const FilterPlan two = optimize_filter_layers(sim, 4, 2, 0);
  EXPECT_EQ(two.filters, (std::vector<int>{0, 1}));
  EXPECT_EQ(idle_filters_note(two), "filter 0 serves no sparse layer: 1 filter retains at least as much (--filters 1)");
  EXPECT_EQ(idle_filters_note(plan), "");
  EXPECT_EQ(idle_filters_note(evaluate_filter_layers(sim, 4, {0, 1, 2}, 0)),
            "filters 0, 1 serve no sparse layer: 1 filter retains at least as much (--filters 1)");
}

TEST(FilterLayersTest, BadInputIsInputError) {
  std::vector<float> sim(16, 0.5f);
  EXPECT_THROW(optimize_filter_layers(sim, 4, 0, 1), InputError);
  EXPECT_THROW(optimize_filter_layers(sim, 4, 5, 1), InputError);
  EXPECT_THROW(optimize_filter_layers(sim, 5, 1, 1), InputError);
  EXPECT_THROW(optimize_filter_layers(sim, 4, 1, -1), InputError);
  EXPECT_THROW(parse_filter_layers("2,x", 4), InputError);
  EXPECT_THROW(parse_filter_layers("2,4", 4), InputError);
  EXPECT_THROW(parse_filter_layers("2,2", 4), InputError);
  EXPECT_THROW(parse_filter_layers("", 4), InputError);
  EXPECT_THROW(parse_filter_layers("1,", 4), InputError);
  EXPECT_THROW(evaluate_filter_layers(sim, 4, {}, 1), InputError);
  EXPECT_EQ(parse_filter_layers("3,0", 4), (std::vector<int>{0, 3}));
}

}  // namespace
}  // namespace kvs
