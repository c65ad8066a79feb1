// Sampler (greedy ties, seeded temperature sampling, nucleus cut) and the generate() loop
// (steps, forced tokens, EOS, cancellation, callbacks, a prompt fed in chunks) on a tiny random
// model.
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

// Records what a controller is asked: after_prefill's prompt length, before_attention's positions.
class CallLog : public CacheController {
 public:
  void after_prefill(int prompt_len, KvSlots&) override { prefilled.push_back(prompt_len); }
  void before_attention(int layer, int q_pos, KvSlots&) override {
    if (layer == 0) asked.push_back(q_pos);
  }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  std::vector<int> prefilled, asked;
};

// A prompt fed in chunks of 4: a prefill of the first, then one extend a chunk (the controller
// asked once a layer at each chunk's first position), then the decode steps; with nothing evicted
// between chunks the logits are the whole prefill's.
TEST(Generate, APromptFedInChunksIsOnePrefillAndAnExtendAChunk) {
  const Model m = tiny::random_model(tiny::tiny_config(), 16);
  const int V = m.config.vocab_size;
  GenerateRequest r;
  r.prompt = {1, 9, 14, 3, 27, 6, 35, 12, 5, 22};
  r.steps = 3;
  r.forced = {4, 17, 30};
  std::vector<float> whole, chunked;  // [steps, vocab] the logits each step was chosen from
  auto run = [&](int chunk, std::vector<float>& logits, CallLog& log) {
    Engine e(m);
    e.set_controller(&log);
    r.prefill_chunk = chunk;
    GenerateCallbacks cb;
    cb.on_token = [&](int, int, std::span<const float> l) { logits.insert(logits.end(), l.begin(), l.end()); };
    EXPECT_EQ(generate(e, r, cb), r.forced);
    EXPECT_EQ(e.pos(), 13);
  };
  CallLog whole_log, chunk_log;
  run(0, whole, whole_log);
  run(4, chunked, chunk_log);
  EXPECT_EQ(whole_log.prefilled, std::vector<int>{10});
  EXPECT_EQ(whole_log.asked, (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(chunk_log.prefilled, std::vector<int>{4});
  EXPECT_EQ(chunk_log.asked, (std::vector<int>{4, 8, 10, 11, 12}));
  ASSERT_EQ(chunked.size(), static_cast<size_t>(3 * V));
  for (size_t i = 0; i < chunked.size(); ++i) EXPECT_NEAR(chunked[i], whole[i], 1e-4) << i;
  // A chunk as long as the prompt is one prefill.
  CallLog one;
  std::vector<float> same;
  run(10, same, one);
  EXPECT_EQ(one.prefilled, std::vector<int>{10});
}

TEST(Generate, StopsBetweenPromptChunksWhenCancelled) {
  const Model m = tiny::random_model(tiny::tiny_config(), 17);
  Engine e(m);
  GenerateRequest r;
  r.prompt = {1, 9, 14, 3, 27, 6, 35, 12, 5, 22};
  r.steps = 3;
  r.prefill_chunk = 3;
  int polls = 0;
  GenerateCallbacks cb;
  cb.cancelled = [&] { return ++polls > 1; };  // after the first extend
  EXPECT_TRUE(generate(e, r, cb).empty());
  EXPECT_EQ(e.pos(), 6);
  // A prompt longer than the context is refused as a whole prefill refuses it.
  r.prompt.assign(m.config.seq_len + 1, 1);
  EXPECT_THROW(generate(e, r), InputError);
}

}  // namespace
}  // namespace kvs
