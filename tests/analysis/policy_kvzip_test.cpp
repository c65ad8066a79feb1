// KVzip: per-head (uniform) and global selection over repeat-pass key scores.
#include <gtest/gtest.h>

#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

static SimInput hand_input() {
  SimInput in = random_input(shape_of(2, 4, 2), 4, 2, 2, 41);
  in.prefill.key_scores = {
      0.9f, 0.1f, 0.8f, 0.2f,  // layer 0, KV head 0
      0.5f, 0.5f, 0.1f, 0.1f,  // layer 0, KV head 1 (tie: the newer position stays)
      0.0f, 0.0f, 0.0f, 0.0f,  // layer 1, KV head 0
      0.7f, 0.6f, 0.95f, 0.3f,  // layer 1, KV head 1
  };
  return in;
}

TEST(Kvzip, UniformKeepsTopBPerHead) {
  const SimInput in = hand_input();
  auto p = policy("kvzip:level=uniform", 2, in.shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(kept_at(r, in, 0, 0, 1), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(kept_at(r, in, 0, 1, 0), (std::vector<int>{2, 3, 4}));  // all-zero scores: newest stay
  EXPECT_EQ(kept_at(r, in, 1, 1, 1), (std::vector<int>{0, 2, 4, 5}));
}

TEST(Kvzip, GlobalThresholdKeepsLTimesHkvTimesB) {
  const SimInput in = hand_input();
  auto p = policy("kvzip", 2, in.shape);  // global: 2 * 2 * 2 = 8 pairs
  const RunData r = run_one(in, *p);
  // Top 8 scores: .95 .9 .8 .7 .6 .5 .5 .3 -> layer 1 head 0 keeps nothing of the prompt.
  EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(kept_at(r, in, 0, 0, 1), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(kept_at(r, in, 0, 1, 0), (std::vector<int>{4}));
  EXPECT_EQ(kept_at(r, in, 0, 1, 1), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Kvzip, MissingScoresIsAnInputError) {
  SimInput in = hand_input();
  in.prefill.key_scores.clear();
  auto p = policy("kvzip", 2, in.shape);
  EXPECT_TRUE(p->needs_key_scores());
  try {
    run_one(in, *p);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "kvzip: needs the repeat-pass scores (run with --model)");
  }
}

TEST(Kvzip, ScoresHandedToTheSimulatorReplaceMissingEvidence) {
  SimInput in = hand_input();
  SimulateOptions opt;
  opt.key_scores = in.prefill.key_scores;
  in.prefill.key_scores.clear();
  auto p = policy("kvzip:level=uniform", 2, in.shape);
  const RunData r = run_one(in, *p, opt);
  EXPECT_EQ(kept_at(r, in, 0, 1, 0), (std::vector<int>{2, 3, 4}));
  opt.key_scores.pop_back();
  EXPECT_THROW(run_one(in, *p, opt), InputError);
}
