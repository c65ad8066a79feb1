// Engine::extend (a chunk of tokens fed in one batched pass over the cache) against the same
// tokens fed as decode steps: the same rows reach observers (keys, probabilities, log-sum-exps),
// the same logits come back, and the cache ends the same; with a controller that leaves keys
// inactive (as KVzip's scoring does), a sliding window, GQA, after a rewind, and with
// rope_in_cache (decode steps underneath); bad input is refused.
#include <gtest/gtest.h>

#include <vector>

#include "capture.h"
#include "compare_rows.h"
#include "inference/engine.h"
#include "inference/errors.h"
#include "tiny_model.h"

namespace kvs {
namespace {

const std::vector<int> kPrompt = {1, 9, 14, 3, 27, 6, 35, 12, 5, 22};
const std::vector<int> kChunk = {21, 4, 30, 8, 17, 2, 33, 11, 19, 7, 25, 3, 36};

using tiny::SkipPositions;

struct Fed {
  tiny::Capture capture;
  std::vector<float> logits;
  std::vector<std::vector<int32_t>> held;  // [layer * n_kv + g] after the chunk
};

Fed feed(const Model& m, EngineOptions o, bool batched, CacheController* controller, int rewind_from = -1) {
  Engine e(m, o);
  e.prefill(kPrompt);
  if (rewind_from >= 0) {  // a detour first, then back to the prompt
    for (int t : {3, 4, 5}) e.decode(t);
    e.rewind(rewind_from);
  }
  Fed f;
  {
    const EngineAttachment attached(e, &f.capture, controller);
    std::span<const float> logits;
    if (batched) {
      logits = e.extend(kChunk);
    } else {
      for (int t : kChunk) logits = e.decode(t);
    }
    f.logits.assign(logits.begin(), logits.end());
  }
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int g = 0; g < m.config.n_kv_heads; ++g) {
      const std::span<const int32_t> held = e.slots().held(l, g);
      f.held.emplace_back(held.begin(), held.end());
    }
  EXPECT_EQ(e.pos(), static_cast<int>(kPrompt.size() + kChunk.size()));
  return f;
}

void expect_same(const Fed& stepped, const Fed& batched, float tol) {
  ASSERT_EQ(stepped.logits.size(), batched.logits.size());
  for (std::size_t i = 0; i < stepped.logits.size(); ++i) EXPECT_NEAR(stepped.logits[i], batched.logits[i], 10 * tol);
  EXPECT_EQ(stepped.held, batched.held);
  EXPECT_EQ(stepped.capture.tokens, batched.capture.tokens);
  EXPECT_EQ(batched.capture.logits_pos, std::vector<int>{static_cast<int>(kPrompt.size() + kChunk.size()) - 1});
  tiny::expect_same_rows(stepped.capture, batched.capture, tol);
}

TEST(EngineExtend, EqualsDecodeSteps) {
  const Model m = tiny::random_model(tiny::tiny_config(), 31);
  expect_same(feed(m, {}, false, nullptr), feed(m, {}, true, nullptr), 1e-5f);
}

TEST(EngineExtend, EqualsDecodeStepsWithInactiveKeys) {
  const Model m = tiny::random_model(tiny::tiny_config(), 32);
  SkipPositions a(2, 7), b(2, 7);  // prompt keys 2..6 skipped, as KVzip skips the context outside a chunk
  const Fed stepped = feed(m, {}, false, &a), batched = feed(m, {}, true, &b);
  expect_same(stepped, batched, 1e-5f);
  for (const tiny::CapturedRow& r : batched.capture.rows)
    for (int k : r.keys) EXPECT_TRUE(k < 2 || k >= 7) << "query " << r.q_pos << " read skipped key " << k;
}

TEST(EngineExtend, EqualsDecodeStepsWithASlidingWindow) {
  ModelConfig c = tiny::tiny_config();
  c.sliding_window = 6;  // shorter than the chunk: later queries drop the chunk's first keys too
  const Model m = tiny::random_model(c, 33);
  expect_same(feed(m, {}, false, nullptr), feed(m, {}, true, nullptr), 1e-5f);
}

TEST(EngineExtend, EqualsDecodeStepsAfterARewind) {
  const Model m = tiny::random_model(tiny::tiny_config(), 34);
  const int P = static_cast<int>(kPrompt.size());
  expect_same(feed(m, {}, false, nullptr), feed(m, {}, true, nullptr, P), 1e-5f);
}

TEST(EngineExtend, RopeInCacheFeedsDecodeSteps) {
  const Model m = tiny::random_model(tiny::tiny_config(), 35);
  EngineOptions o;
  o.rope_in_cache = true;
  expect_same(feed(m, o, false, nullptr), feed(m, o, true, nullptr), 0.0f);
}

TEST(EngineExtend, BadInputIsRefused) {
  ModelConfig c = tiny::tiny_config();
  c.seq_len = 12;
  const Model m = tiny::random_model(c, 36);
  Engine e(m);
  e.prefill(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_THROW(e.extend(std::vector<int>{}), InputError);
  EXPECT_THROW(e.extend(std::vector<int>{1, 2, 3}), InputError);   // positions 10..12 past 12
  EXPECT_THROW(e.extend(std::vector<int>{1, 40}), InputError);     // id outside the vocabulary
  EXPECT_EQ(e.pos(), 10);                                           // nothing was fed
  EXPECT_EQ(e.extend(std::vector<int>{1, 2}).size(), static_cast<std::size_t>(c.vocab_size));
  EXPECT_EQ(e.pos(), 12);
}

}  // namespace
}  // namespace kvs
