// Sampler (greedy ties, seeded temperature sampling, nucleus cut) and the generate() loop
// (steps, forced tokens, EOS, cancellation, callbacks) on a tiny random model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "inference/errors.h"
#include "inference/generate.h"
#include "tiny_model.h"

namespace kvs {
namespace {

TEST(Sampler, GreedyTakesArgmaxWithLowestIdOnTies) {
  Sampler s({});
  const std::vector<float> a = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(a), 1);
  const std::vector<float> b = {5.0f, 5.0f};
  EXPECT_EQ(s.sample(b), 0);
}

TEST(Sampler, SameSeedSameSequence) {
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 0.2f, -0.3f};
  SamplingOptions o;
  o.temperature = 1.0f;
  o.seed = 7;
  Sampler a(o), b(o);
  std::vector<int> sa, sb;
  for (int i = 0; i < 50; ++i) {
    sa.push_back(a.sample(logits));
    sb.push_back(b.sample(logits));
  }
  EXPECT_EQ(sa, sb);
  o.seed = 8;
  Sampler c(o);
  std::vector<int> sc;
  for (int i = 0; i < 50; ++i) sc.push_back(c.sample(logits));
  EXPECT_NE(sa, sc);
}

TEST(Sampler, FrequenciesFollowTheTemperedDistribution) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};  // p = 1/8, 2/8, 5/8
  SamplingOptions o;
  o.temperature = 1.0f;
  Sampler s(o);
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.sample(logits)];
  EXPECT_NEAR(count[0] / double(n), 0.125, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.25, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.625, 0.015);
}

TEST(Sampler, TopPKeepsOnlyTheNucleus) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};  // 1/8, 2/8, 5/8
  SamplingOptions o;
  o.temperature = 1.0f;
  o.top_p = 0.8f;  // 5/8 < 0.8 <= 7/8: tokens 2 and 1, renormalised to 5/7 and 2/7
  Sampler s(o);
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.sample(logits)];
  EXPECT_EQ(count[0], 0);
  EXPECT_NEAR(count[2] / double(n), 5.0 / 7.0, 0.015);
  o.top_p = 0.5f;  // the top token alone
  Sampler t(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(t.sample(logits), 2);
}

TEST(Sampler, RejectsBadOptions) {
  SamplingOptions o;
  o.top_p = 0.0f;
  EXPECT_THROW(Sampler{o}, InputError);
  o.top_p = 1.0f;
  o.temperature = -1.0f;
  EXPECT_THROW(Sampler{o}, InputError);
}

TEST(Generate, GreedyFeedsEveryTokenBack) {
  const Model m = tiny::random_model(tiny::tiny_config(), 12);
  Engine e(m);
  GenerateRequest r;
  r.prompt = {1, 5, 9};
  r.steps = 6;
  std::vector<int> seen;
  GenerateCallbacks cb;
  cb.on_token = [&](int step, int token, std::span<const float> logits) {
    EXPECT_EQ(step, static_cast<int>(seen.size()));
    EXPECT_EQ(static_cast<int>(logits.size()), m.config.vocab_size);
    seen.push_back(token);
  };
  const std::vector<int> out = generate(e, r, cb);
  EXPECT_EQ(out.size(), 6u);
  EXPECT_EQ(out, seen);
  EXPECT_EQ(e.pos(), 9);
  // Each token is the argmax of the logits after the previous ones (checked by replay).
  Engine f(m);
  Sampler greedy({});
  std::span<const float> lg = f.prefill(r.prompt);
  for (int t : out) {
    EXPECT_EQ(greedy.sample(lg), t);
    lg = f.decode(t);
  }
}

TEST(Generate, ForcedModeFeedsTheGivenTokens) {
  const Model m = tiny::random_model(tiny::tiny_config(), 13);
  Engine e(m);
  GenerateRequest r;
  r.prompt = {1, 2};
  r.steps = 4;
  r.forced = {7, 7, 3, 30, 12};
  EXPECT_EQ(generate(e, r), (std::vector<int>{7, 7, 3, 30}));
  r.forced = {7};
  EXPECT_THROW(generate(e, r), InputError);
}

TEST(Generate, StopsBeforeFeedingEosAndWhenCancelled) {
  const Model m = tiny::random_model(tiny::tiny_config(), 14);
  Engine e(m);
  GenerateRequest r;
  r.prompt = {1, 2};
  r.steps = 5;
  r.forced = {4, 6, 0, 8, 9};
  r.end_ids = {0};
  EXPECT_EQ(generate(e, r), (std::vector<int>{4, 6}));
  EXPECT_EQ(e.pos(), 4);
  r.stop_at_eos = false;
  EXPECT_EQ(generate(e, r).size(), 5u);
  int polls = 0;
  GenerateCallbacks cb;
  cb.cancelled = [&] { return ++polls > 2; };
  EXPECT_EQ(generate(e, r, cb).size(), 2u);
}

TEST(Generate, StopsAtTheEndOfTheContext) {
  ModelConfig c = tiny::tiny_config();
  c.seq_len = 6;
  const Model m = tiny::random_model(c, 15);
  Engine e(m);
  GenerateRequest r;
  r.prompt = {1, 2, 3, 4};
  r.steps = 10;
  EXPECT_EQ(generate(e, r).size(), 2u);
  EXPECT_EQ(e.pos(), 6);
}

}  // namespace
}  // namespace kvs
