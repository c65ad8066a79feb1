// Engine::snapshot_prefill / restore_prefill on the CPU: a run started from a snapshot of a
// prompt's prefill (its controller compressing the restored cache as a prefill lets it) computes
// the logits, cache sizes and peak of a run that prefilled the prompt itself, bit for bit, with
// original positions, rope_in_cache and a 16-bit cache (copied as it holds its rows); and the
// misuses are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "forced_logits.h"
#include "inference/engine.h"
#include "tiny_model.h"

namespace kvs {
namespace {

const std::vector<int> kPrompt = {1, 9, 14, 3, 27, 6, 35, 12, 2, 19};  // P = 10
const std::vector<int> kForced = {21, 4, 30, 8, 17, 5, 11};

// Keeps the first and the last three held entries of every (layer, KV head) after the prefill
// and after each decode attention; leaves the second entry of odd layers inactive.
class Trims : public CacheController {
 public:
  void after_prefill(int prompt_len, KvSlots& kv) override {
    prompt_lens.push_back(prompt_len);
    for (int l = 0; l < kv.n_layers(); ++l) trim(kv, l);
  }
  void before_attention(int layer, int, KvSlots& kv) override {
    if (layer % 2 == 0) return;
    for (int g = 0; g < kv.n_kv_heads(); ++g) kv.active(layer, g)[1] = 0;
  }
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) override { trim(kv, layer); }
  std::vector<int> prompt_lens;  // what after_prefill was told, call by call

 private:
  static void trim(KvSlots& kv, int l) {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const std::size_t n = kv.held(l, g).size();
      std::vector<uint8_t> keep(n, 0);
      for (std::size_t i = 0; i < n; ++i) keep[i] = i == 0 || i + 3 >= n;
      kv.evict(l, g, keep);
    }
  }
};

TEST(EngineSnapshot, ARunFromTheSnapshotEqualsOneThatPrefilledBitwise) {
  const Model model = tiny::random_model(tiny::tiny_config(), 5);
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant == 0   ? "original positions"
                 : variant == 1 ? "rope_in_cache"
                 : variant == 2 ? "fp16 cache"
                                : "bf16 cache, rope_in_cache");
    EngineOptions o;
    o.n_threads = 2;
    o.rope_in_cache = variant == 1 || variant == 3;
    o.kv_dtype = variant == 2 ? KvDtype::Fp16 : variant == 3 ? KvDtype::Bf16 : KvDtype::Fp32;
    Engine fresh(model, o), shared(model, o);
    Trims fresh_ctl, shared_ctl;
    const test::ForcedRun want = test::forced_logits(fresh, kPrompt, kForced, &fresh_ctl);

    shared.prefill(kPrompt);
    const std::shared_ptr<const PrefillSnapshot> snap = shared.snapshot_prefill();
    ASSERT_TRUE(snap);
    for (int t : kForced) shared.decode(t);  // another run in between: the cache moves on
    const test::ForcedRun got = test::forced_logits(shared, kPrompt, kForced, &shared_ctl, snap.get());
    EXPECT_EQ(got.logits, want.logits);
    EXPECT_EQ(got.kv_bytes, want.kv_bytes);
    EXPECT_EQ(shared.peak_kv_bytes(), fresh.peak_kv_bytes());
    EXPECT_EQ(shared_ctl.prompt_lens, std::vector<int>{static_cast<int>(kPrompt.size())});
    // The snapshot serves again, after a run that evicted.
    Trims again_ctl;
    EXPECT_EQ(test::forced_logits(shared, kPrompt, kForced, &again_ctl, snap.get()).logits, want.logits);
  }
}

TEST(EngineSnapshot, RefusesACompressedCacheAndAnotherEnginesSnapshot) {
  const Model model = tiny::random_model(tiny::tiny_config(), 5);
  Engine a(model), b(model);
  Trims ctl;
  a.set_controller(&ctl);
  a.prefill(kPrompt);
  EXPECT_THROW(a.snapshot_prefill(), std::logic_error);  // entries evicted
  a.set_controller(nullptr);
  EXPECT_THROW(b.snapshot_prefill(), std::logic_error);  // nothing prefilled
  a.prefill(kPrompt);
  const auto snap = a.snapshot_prefill();
  ASSERT_TRUE(snap);
  EXPECT_THROW(b.restore_prefill(*snap), std::logic_error);
}

}  // namespace
}  // namespace kvs
