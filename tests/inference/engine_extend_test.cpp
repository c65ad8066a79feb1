// Engine::extend (a chunk of tokens fed in one batched pass over the cache) against the same
// tokens fed as decode steps: the same rows reach observers (keys, probabilities, log-sum-exps),
// the same logits come back, and the cache ends the same; with a controller that leaves keys
// inactive (as KVzip's scoring does), a sliding window, GQA, after a rewind, a chunk longer than
// one attention block, over a 16-bit cache, and with rope_in_cache (decode steps underneath). The controller's calls,
// a hook that throws (nothing fed), and bad input.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "capture.h"
#include "compare_rows.h"
#include "inference/engine.h"
#include "inference/errors.h"
#include "sixteen_bit_caches.h"
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
  int last_pos = 0;                        // the chunk's last position
};

std::vector<std::vector<int32_t>> held_positions(Engine& e) {
  std::vector<std::vector<int32_t>> held;  // [layer * n_kv + g]
  for (int l = 0; l < e.model().config.n_layers; ++l)
    for (int g = 0; g < e.model().config.n_kv_heads; ++g) {
      const std::span<const int32_t> h = e.slots().held(l, g);
      held.emplace_back(h.begin(), h.end());
    }
  return held;
}

Fed feed(const Model& m, EngineOptions o, bool batched, CacheController* controller, int rewind_from = -1,
         const std::vector<int>& chunk = kChunk) {
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
      logits = e.extend(chunk);
    } else {
      for (int t : chunk) logits = e.decode(t);
    }
    f.logits.assign(logits.begin(), logits.end());
  }
  f.held = held_positions(e);
  f.last_pos = static_cast<int>(kPrompt.size() + chunk.size()) - 1;
  EXPECT_EQ(e.pos(), f.last_pos + 1);
  return f;
}

void expect_same(const Fed& stepped, const Fed& batched, float tol) {
  ASSERT_EQ(stepped.logits.size(), batched.logits.size());
  for (std::size_t i = 0; i < stepped.logits.size(); ++i) EXPECT_NEAR(stepped.logits[i], batched.logits[i], 10 * tol);
  EXPECT_EQ(stepped.held, batched.held);
  EXPECT_EQ(stepped.capture.tokens, batched.capture.tokens);
  EXPECT_EQ(batched.capture.logits_pos, std::vector<int>{batched.last_pos});
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

// Gemma 3's local layers (a window of 4, their own RoPE base) beside a global one, post-block norms
// and GeGLU, Gemma 2's (every other layer local, soft-capped scores and logits) and OLMo 2's (norms
// after the blocks only, QK-norm across heads): the batched chunk gives the decode steps' rows and
// logits; with RoPE applied in the cache too.
TEST(EngineExtend, EqualsDecodeStepsOnGemmaAndOlmoLayers) {
  for (const Model& m : {tiny::random_model(tiny::gemma3_config(), 38), tiny::random_model(tiny::gemma2_config(), 40),
                         tiny::random_model(tiny::olmo2_config(), 42), tiny::random_model(tiny::exaone4_config(), 43)}) {
    SCOPED_TRACE(m.config.arch);
    expect_same(feed(m, {}, false, nullptr), feed(m, {}, true, nullptr), 1e-5f);
    EngineOptions o;
    o.rope_in_cache = true;
    expect_same(feed(m, o, false, nullptr), feed(m, o, true, nullptr), 0.0f);
  }
}

TEST(EngineExtend, EqualsDecodeStepsAfterARewind) {
  const Model m = tiny::random_model(tiny::tiny_config(), 34);
  const int P = static_cast<int>(kPrompt.size());
  expect_same(feed(m, {}, false, nullptr), feed(m, {}, true, nullptr, P), 1e-5f);
}

// A 16-bit cache: the batched chunk reads the cache's rounded numbers (widened) as decode steps do,
// with keys left inactive, and with RoPE applied in the cache.
TEST(EngineExtend, EqualsDecodeStepsOverA16BitCache) {
  const Model m = tiny::random_model(tiny::tiny_config(), 36);
  for (const auto& [name, o] : tiny::sixteen_bit_caches()) {
    SCOPED_TRACE(name);
    SkipPositions a(2, 7), b(2, 7);
    expect_same(feed(m, o, false, &a), feed(m, o, true, &b), o.rope_in_cache ? 0.0f : 1e-5f);
  }
}

// 300 queries: two of the engine's attention blocks of 256 (and the kernel's rows on threads).
TEST(EngineExtend, EqualsDecodeStepsOverSeveralAttentionBlocks) {
  ModelConfig c = tiny::tiny_config();
  c.seq_len = 400;
  std::vector<int> chunk;
  for (int i = 0; i < 300; ++i) chunk.push_back(1 + (i * 7) % (c.vocab_size - 1));
  for (int window : {0, 37}) {
    SCOPED_TRACE("window " + std::to_string(window));
    c.sliding_window = window;
    const Model m = tiny::random_model(c, 37);
    SkipPositions a(2, 7), b(2, 7);
    expect_same(feed(m, {}, false, &a, -1, chunk), feed(m, {}, true, &b, -1, chunk), 1e-5f);
  }
}

// Fed as decode steps underneath, extend still gives observers one set of logits, the last.
TEST(EngineExtend, RopeInCacheGivesTheSameEventsThroughDecodeSteps) {
  const Model m = tiny::random_model(tiny::tiny_config(), 35);
  EngineOptions o;
  o.rope_in_cache = true;
  expect_same(feed(m, o, false, nullptr), feed(m, o, true, nullptr), 0.0f);
}

// Records the controller's calls; throws in before_attention of layer `fail_layer` when set.
class CallLog : public CacheController {
 public:
  explicit CallLog(int fail_layer = -1) : fail_layer_(fail_layer) {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int q_pos, KvSlots&) override {
    if (layer == fail_layer_) throw std::runtime_error("policy failed");
    before.emplace_back(layer, q_pos);
  }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override { ++after; }
  std::vector<std::pair<int, int>> before;  // (layer, q_pos)
  int after = 0;

 private:
  int fail_layer_;
};

// The batched pass asks the controller once a layer, at the chunk's first position, and never
// after attention; fed as decode steps (rope_in_cache, the GPU) it asks at every step, and
// after_attention is held back there too, so neither evicts inside a chunk.
TEST(EngineExtend, TheControllerIsAskedBeforeAttentionOnly) {
  const Model m = tiny::random_model(tiny::tiny_config(), 38);
  const int P = static_cast<int>(kPrompt.size()), L = m.config.n_layers;
  for (bool rope_in_cache : {false, true}) {
    SCOPED_TRACE(rope_in_cache ? "decode steps underneath" : "batched");
    EngineOptions o;
    o.rope_in_cache = rope_in_cache;
    Engine e(m, o);
    e.prefill(kPrompt);
    CallLog log;
    const EngineAttachment attached(e, nullptr, &log);
    e.extend(std::vector<int>{5, 6, 7});
    std::vector<std::pair<int, int>> want;
    for (int q = P; q < (rope_in_cache ? P + 3 : P + 1); ++q)
      for (int l = 0; l < L; ++l) want.emplace_back(l, q);
    EXPECT_EQ(log.before, want);
    EXPECT_EQ(log.after, 0);
  }
}

// A hook that throws part-way leaves the engine as it was: the same position and cache, and the
// next extend computes what a fresh engine does. Decode likewise.
TEST(EngineExtend, AHookThatThrowsLeavesNothingFed) {
  const Model m = tiny::random_model(tiny::tiny_config(), 39);
  const int P = static_cast<int>(kPrompt.size());
  for (bool rope_in_cache : {false, true}) {
    SCOPED_TRACE(rope_in_cache ? "decode steps underneath" : "batched");
    EngineOptions o;
    o.rope_in_cache = rope_in_cache;
    Engine fresh(m, o), e(m, o);
    fresh.prefill(kPrompt);
    const std::span<const float> f = fresh.extend(kChunk);
    const std::vector<float> want(f.begin(), f.end());
    e.prefill(kPrompt);
    const auto held_before = held_positions(e);
    CallLog fails(1);
    e.set_controller(&fails);
    EXPECT_THROW(e.extend(kChunk), std::runtime_error);
    EXPECT_THROW(e.decode(kChunk[0]), std::runtime_error);
    e.set_controller(nullptr);
    EXPECT_EQ(e.pos(), P);
    EXPECT_EQ(held_positions(e), held_before);
    const std::span<const float> got = e.extend(kChunk);
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), want);
  }
}

// A controller that leaves a query of the chunk no key (the chunk's last key only active) is
// named by layer and KV head, and nothing is fed.
TEST(EngineExtend, AQueryLeftWithoutKeysIsNamed) {
  const Model m = tiny::random_model(tiny::tiny_config(), 40);
  Engine e(m);
  e.prefill(kPrompt);
  const int last = static_cast<int>(kPrompt.size() + kChunk.size()) - 1;
  SkipPositions all_but_last(0, last);
  e.set_controller(&all_but_last);
  try {
    e.extend(kChunk);
    ADD_FAILURE() << "extend fed queries with no key";
  } catch (const std::logic_error& err) {
    EXPECT_NE(std::string(err.what()).find("layer 0 KV head 0: "), std::string::npos) << err.what();
  }
  e.set_controller(nullptr);
  EXPECT_EQ(e.pos(), static_cast<int>(kPrompt.size()));
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
