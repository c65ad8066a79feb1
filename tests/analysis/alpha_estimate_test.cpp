// Training-free α estimation on stories260K: shape, range, max exactly 1, determinism, the
// single-head streaming controller, and the published TSV layout it writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/alpha_estimate.h"
#include "analysis/duo_pattern.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

// Positions only: enough KvSlots for a controller test.
class FakeSlots : public KvSlots {
 public:
  FakeSlots(int L, int Hkv, std::vector<int32_t> held)
      : L_(L), H_(Hkv), held_((size_t)L * Hkv, held), active_((size_t)L * Hkv, std::vector<uint8_t>(held.size(), 1)) {}
  int n_layers() const override { return L_; }
  int n_kv_heads() const override { return H_; }
  std::span<const int32_t> held(int l, int g) const override { return held_[(size_t)l * H_ + g]; }
  std::span<uint8_t> active(int l, int g) override { return active_[(size_t)l * H_ + g]; }
  void evict(int l, int g, std::span<const uint8_t> keep) override {
    std::vector<int32_t> h;
    std::vector<uint8_t> a;
    for (size_t i = 0; i < keep.size(); ++i) {
      if (keep[i]) { h.push_back(held_[(size_t)l * H_ + g][i]); a.push_back(active_[(size_t)l * H_ + g][i]); }
    }
    held_[(size_t)l * H_ + g] = h;
    active_[(size_t)l * H_ + g] = a;
  }
  std::vector<uint8_t> active_of(int l, int g) const { return active_[(size_t)l * H_ + g]; }
  std::vector<int32_t> held_of(int l, int g) const { return held_[(size_t)l * H_ + g]; }
 private:
  int L_, H_;
  std::vector<std::vector<int32_t>> held_;
  std::vector<std::vector<uint8_t>> active_;
};

std::vector<int32_t> iota_positions(int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(AlphaEstimateTest, ControllerRestrictsOnlyItsHead) {
  FakeSlots kv(2, 2, iota_positions(12));
  ForcedRunController c(1, 0, 2, 3);  // layer 1, KV head 0, sink 2, recent 3
  c.before_attention(0, 11, kv);
  EXPECT_EQ(kv.active_of(1, 0), std::vector<uint8_t>(12, 1));
  c.before_attention(1, 11, kv);
  EXPECT_EQ(kv.active_of(1, 0), (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));  // [0,2) ∪ [8,11]
  EXPECT_EQ(kv.active_of(1, 1), std::vector<uint8_t>(12, 1));
  EXPECT_EQ(kv.held_of(1, 0), iota_positions(12));
}

TEST(AlphaEstimateTest, ControllerCountsSlotsAndSetsEveryFlagAgain) {
  // Held positions with a gap: the restriction counts slots (keys are rotated by slot), not positions.
  FakeSlots kv(1, 1, {0, 1, 2, 3, 4, 5, 9, 10, 11});
  ForcedRunController c(0, 0, 1, 2);
  c.before_attention(0, 11, kv);
  // Slots 0..8: sink slot 0 and the last 3 slots (recent 2 + the query).
  EXPECT_EQ(kv.active_of(0, 0), (std::vector<uint8_t>{1, 0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(kv.held_of(0, 0), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 9, 10, 11}));  // nothing evicted
  ForcedRunController none(-1, 0, 1, 2);  // the next run, full attention, on the same prefill
  none.before_attention(0, 11, kv);
  EXPECT_EQ(kv.active_of(0, 0), std::vector<uint8_t>(9, 1));
}

class AlphaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = test::shared_path("models/stories260K/");
    model_ = load_model(dir + "stories260K.bin");
    tok_ = load_tokenizer(model_, dir + "tok512.bin");
  }
  AlphaEstimateOptions small() const {
    AlphaEstimateOptions o;
    o.context_tokens = 160;
    o.depths = {0.3, 0.7};
    o.sink = 4;
    o.recent = 16;
    o.engine.n_threads = 1;  // a tiny model: threads only add synchronization
    return o;
  }
  Model model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(AlphaModelTest, GatesAreNormalizedAndDeterministic) {
  AlphaEstimateOptions o = small();
  int calls = 0, last_total = 0;
  o.progress = [&](int done, int total) { ++calls; last_total = total; EXPECT_EQ(done, calls); };
  AlphaEstimate a = estimate_alpha(model_, *tok_, o);
  const int L = model_.config.n_layers, Hkv = model_.config.n_kv_heads;
  ASSERT_EQ(a.alpha.size(), (size_t)L * Hkv);
  EXPECT_EQ(a.n_prompts, 2);
  EXPECT_GT(a.n_scored_steps, 2);
  EXPECT_EQ(calls, 2 * (1 + L * Hkv));
  EXPECT_EQ(last_total, calls);
  for (float v : a.alpha) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
  EXPECT_EQ(*std::max_element(a.alpha.begin(), a.alpha.end()), 1.0f);
  // Restricting a head changes the logits somewhere, and not equally everywhere.
  EXPECT_LT(*std::min_element(a.alpha.begin(), a.alpha.end()), 1.0f);
  o.progress = nullptr;
  AlphaEstimate b = estimate_alpha(model_, *tok_, o);
  EXPECT_EQ(a.alpha, b.alpha);
  EXPECT_EQ(a.raw, b.raw);
  // Sharing one prefill per prompt gives exactly what a fresh prefill per run gives.
  o.reuse_prefill = false;
  AlphaEstimate fresh = estimate_alpha(model_, *tok_, o);
  EXPECT_EQ(fresh.raw, a.raw);
}

TEST_F(AlphaModelTest, KlDistanceAndPatternFile) {
  AlphaEstimateOptions o = small();
  o.depths = {0.5};
  o.distance = "kl";
  AlphaEstimate a = estimate_alpha(model_, *tok_, o);
  EXPECT_EQ(*std::max_element(a.alpha.begin(), a.alpha.end()), 1.0f);
  EXPECT_NE(a.source().find("kl"), std::string::npos);
  const std::string dir = ::testing::TempDir() + "alpha_estimate_test_pattern";
  std::filesystem::remove_all(dir);
  write_alpha_pattern(dir, a);
  DuoPattern back = read_duo_pattern(dir);
  EXPECT_EQ(back.n_layers, model_.config.n_layers);
  EXPECT_EQ(back.n_kv_heads, model_.config.n_kv_heads);
  EXPECT_EQ(back.sink_size, 4);
  EXPECT_EQ(back.recent_size, 16);
  ASSERT_EQ(back.alpha.size(), a.alpha.size());
  for (size_t i = 0; i < a.alpha.size(); ++i) EXPECT_FLOAT_EQ(back.alpha[i], a.alpha[i]);
  std::filesystem::remove_all(dir);
}

TEST_F(AlphaModelTest, BadOptionsAreInputErrors) {
  AlphaEstimateOptions o = small();
  o.distance = "l1";
  EXPECT_THROW(estimate_alpha(model_, *tok_, o), InputError);
  o = small();
  o.recent = -1;
  EXPECT_THROW(estimate_alpha(model_, *tok_, o), InputError);
  o = small();
  o.depths.clear();
  EXPECT_THROW(estimate_alpha(model_, *tok_, o), InputError);
  o = small();
  o.context_tokens = 5000;  // longer than stories260K's 512
  EXPECT_THROW(estimate_alpha(model_, *tok_, o), InputError);
}

}  // namespace
}  // namespace kvs
