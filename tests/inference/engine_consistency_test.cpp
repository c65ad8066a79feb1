// Engine invariants: prefill equals token-by-token decode (over an fp32 or 16-bit cache), the two RoPE conventions agree after
// the HF permutation, rope_in_cache with a full cache changes nothing, a rewind forgets exactly
// what came after it, and bad input is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "inference/engine.h"
#include "inference/errors.h"
#include "sixteen_bit_caches.h"
#include "tiny_model.h"

namespace kvs {
namespace {

const std::vector<int> kTokens = {1, 17, 4, 33, 8, 25, 2, 39, 11, 6, 20, 14, 3};

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "index " << i;
}

TEST(EngineConsistency, PrefillLogitsEqualTokenByTokenDecode) {
  const Model m = tiny::random_model(tiny::tiny_config(), 1);
  Engine e(m);
  const std::vector<float> prefill = copy(e.prefill(kTokens));
  EXPECT_EQ(e.pos(), static_cast<int>(kTokens.size()));
  e.reset();
  std::vector<float> decode;
  for (int t : kTokens) decode = copy(e.decode(t));
  EXPECT_EQ(e.pos(), static_cast<int>(kTokens.size()));
  expect_close(prefill, decode, 1e-4f);
}

// A 16-bit cache: the prompt's attention reads the keys and values rounded as the cache holds
// them (fp32 scratch), decode reads the cache's 16-bit rows; the two agree, for keys cached at
// their position or before rotation.
TEST(EngineConsistency, PrefillEqualsDecodeOverA16BitCache) {
  const Model m = tiny::random_model(tiny::tiny_config(), 1);
  for (const auto& [name, o] : tiny::sixteen_bit_caches()) {
    SCOPED_TRACE(name);
    Engine e(m, o);
    const std::vector<float> prefill = copy(e.prefill(kTokens));
    e.reset();
    std::vector<float> decode;
    for (int t : kTokens) decode = copy(e.decode(t));
    expect_close(prefill, decode, 1e-4f);
  }
}

TEST(EngineConsistency, PrefillThenDecodeEqualsLongerPrefill) {
  const Model m = tiny::random_model(tiny::tiny_config(), 2);
  Engine e(m);
  e.prefill(std::span(kTokens).first(8));
  std::vector<float> stepped;
  for (std::size_t i = 8; i < kTokens.size(); ++i) stepped = copy(e.decode(kTokens[i]));
  const std::vector<float> whole = copy(e.prefill(kTokens));
  expect_close(stepped, whole, 1e-4f);
}

// A rewound engine computes what a fresh one does on the same tokens, bit for bit: the cache
// keeps the first n positions and nothing of what came after.
TEST(EngineConsistency, RewindForgetsTheLaterPositions) {
  const Model m = tiny::random_model(tiny::tiny_config(), 2);
  for (bool rope_in_cache : {false, true}) {
    SCOPED_TRACE(rope_in_cache ? "rope in cache" : "rope at position");
    EngineOptions o;
    o.rope_in_cache = rope_in_cache;
    Engine fresh(m, o), rewound(m, o);
    fresh.prefill(std::span(kTokens).first(8));
    const std::vector<float> want = copy(fresh.decode(30));
    rewound.prefill(std::span(kTokens).first(8));
    for (int t : {5, 12, 7}) rewound.decode(t);
    const std::size_t bytes_before = rewound.kv_bytes();
    rewound.rewind(8);
    EXPECT_EQ(rewound.pos(), 8);
    EXPECT_EQ(rewound.kv_bytes(), bytes_before * 8 / 11);
    EXPECT_EQ(rewound.peak_kv_bytes(), bytes_before);
    for (int l = 0; l < m.config.n_layers; ++l) {
      for (int g = 0; g < m.config.n_kv_heads; ++g) EXPECT_EQ(rewound.slots().held(l, g).back(), 7);
    }
    EXPECT_EQ(copy(rewound.decode(30)), want);
    rewound.rewind(0);  // the same as reset()
    EXPECT_EQ(rewound.pos(), 0);
    EXPECT_EQ(rewound.kv_bytes(), 0u);
  }
  Engine e(m);
  e.prefill(std::span(kTokens).first(4));
  EXPECT_THROW(e.rewind(5), std::logic_error);
  EXPECT_THROW(e.rewind(-1), std::logic_error);
}

TEST(EngineConsistency, RotateHalfModelEqualsPermutedInterleavedModel) {
  ModelConfig c = tiny::tiny_config();
  c.qkv_bias = true;
  c.qk_norm = true;  // the norm weights are permuted with the rows
  const Model inter = tiny::random_model(c, 3);
  const Model half = tiny::to_rotate_half(inter);
  Engine a(inter), b(half);
  expect_close(copy(a.prefill(kTokens)), copy(b.prefill(kTokens)), 1e-5f);
  expect_close(copy(a.decode(5)), copy(b.decode(5)), 1e-5f);
}

TEST(EngineConsistency, LogitsMatchNaiveForwardForBothStyles) {
  const Model inter = tiny::random_model(tiny::tiny_config(), 4);
  for (const Model& m : {inter, tiny::to_rotate_half(inter)}) {
    Engine e(m);
    const std::vector<float> got = copy(e.prefill(kTokens));
    const tiny::Reference ref = tiny::reference_forward(m, kTokens);
    const int V = m.config.vocab_size;
    for (int i = 0; i < V; ++i) {
      EXPECT_NEAR(got[i], ref.logits[static_cast<std::size_t>(ref.T - 1) * V + i], 1e-4);
    }
  }
}

// Keys cached before RoPE and rotated by their slot give a full cache's logits; on Gemma 3's
// layers too, whose local ones rotate with their own base, Gemma 2's soft-capped ones, OLMo 2's
// (QK-norm across heads, norms after the blocks) and SmolLM3's (a NoPE layer).
TEST(EngineConsistency, RopeInCacheWithFullCacheChangesNothing) {
  for (const Model& m : {tiny::random_model(tiny::tiny_config(), 6), tiny::random_model(tiny::gemma3_config(), 8),
                         tiny::random_model(tiny::gemma2_config(), 9), tiny::random_model(tiny::olmo2_config(), 10),
                         tiny::random_model(tiny::smollm3_config(), 11)}) {
    SCOPED_TRACE(m.config.arch);
    EngineOptions shifted;
    shifted.rope_in_cache = true;
    Engine a(m), b(m, shifted);
    expect_close(copy(a.prefill(kTokens)), copy(b.prefill(kTokens)), 1e-5f);
    for (int t : {3, 9, 27}) expect_close(copy(a.decode(t)), copy(b.decode(t)), 1e-5f);
  }
}

// LongRoPE: a forward pass that ends within the original context rotates with the short factors,
// one that ends past it with the long ones (the prompt's 13 tokens past an original of 8); the
// same model with both factor sets made the short or the long one gives the other's logits.
TEST(EngineConsistency, LongRopeChoosesItsFactorsByWhereThePassEnds) {
  ModelConfig c = tiny::with_longrope(tiny::tiny_config(), 8, 1.2f);
  c.rope_style = RopeStyle::RotateHalf;
  const Model m = tiny::random_model(c, 12);
  Model short_only = m, long_only = m;
  short_only.config.rope_scaling.long_factor = c.rope_scaling.short_factor;
  long_only.config.rope_scaling.short_factor = c.rope_scaling.long_factor;
  const auto logits = [](const Model& model, std::span<const int> tokens) {
    Engine e(model);
    return copy(e.prefill(tokens));
  };
  const std::span<const int> within = std::span(kTokens).first(8), past = kTokens;
  expect_close(logits(m, within), logits(short_only, within), 0.0f);
  expect_close(logits(m, past), logits(long_only, past), 0.0f);
  const std::vector<float> a = logits(m, past), b = logits(short_only, past);
  float moved = 0;
  for (std::size_t i = 0; i < a.size(); ++i) moved = std::max(moved, std::abs(a[i] - b[i]));
  EXPECT_GT(moved, 1e-3f);
}

TEST(EngineConsistency, LinearRopeScalingMatchesNaiveForward) {
  ModelConfig c = tiny::tiny_config();
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 4.0f;
  const Model scaled = tiny::random_model(c, 7);
  Model plain = scaled;
  plain.config.rope_scaling = {};
  Engine a(scaled), b(plain);
  const std::vector<float> la = copy(a.prefill(kTokens)), lb = copy(b.prefill(kTokens));
  const tiny::Reference ref = tiny::reference_forward(scaled, kTokens);
  const int V = c.vocab_size;
  float diff = 0;
  for (int i = 0; i < V; ++i) {
    EXPECT_NEAR(la[i], ref.logits[static_cast<std::size_t>(ref.T - 1) * V + i], 1e-4);
    diff = std::max(diff, std::abs(la[i] - lb[i]));
  }
  EXPECT_GT(diff, 1e-3f);  // the scaling really changed the positions
}

TEST(EngineConsistency, BadInputIsRefused) {
  ModelConfig c = tiny::tiny_config();
  c.seq_len = 8;
  const Model m = tiny::random_model(c, 8);
  Engine e(m);
  EXPECT_THROW(e.prefill({}), InputError);
  try {
    e.prefill(kTokens);  // 13 tokens > 8
    FAIL() << "no error for a prompt longer than the context";
  } catch (const InputError& err) {
    EXPECT_STREQ(err.what(), "prompt: 13 tokens exceed the model's context of 8");
  }
  EXPECT_THROW(e.prefill(std::vector<int>{1, 40}), InputError);  // id past the vocabulary
  e.prefill(std::span(kTokens).first(8));
  EXPECT_THROW(e.decode(3), InputError);  // context full
  ModelConfig bad = tiny::tiny_config();
  bad.rope_scaling.type = "dynamic";  // a scaling the engine does not know
  const Model mb = tiny::random_model(bad, 9);
  EXPECT_THROW(Engine{mb}, InputError);
  bad.rope_scaling.type = "longrope";  // without its factors
  const Model ml = tiny::random_model(bad, 9);
  EXPECT_THROW(Engine{ml}, InputError);
}

}  // namespace
}  // namespace kvs
