// The live run's controller: the kept set it records at each decode attention (held and active
// = 1, held and inactive = 2) for caches holding runs of positions, scattered ones and a mix,
// each head's own where heads hold alike (their rows copied), and the rows it hands the policy:
// the engine's rows renormalized exactly as the simulator renormalizes recorded ones
// (renormalize_row).
#include "analysis/enforcing_controller.h"

#include <gtest/gtest.h>

#include <random>

#include "analysis/policy_util.h"
#include "analysis/position_slots.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

namespace {

// Keeps the rows it is handed.
class RowSpy : public Policy {
 public:
  RowSpy() : Policy(parse_policy_spec("full", 1)) {}
  std::string params_json() const override { return "{}"; }
  void begin(const PolicyContext&) override {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock> heads, KvSlots&) override {
    rows.clear();
    lse.clear();
    for (const AttentionBlock& b : heads) {
      rows.emplace_back(b.probs, b.probs + b.n_keys);
      lse.push_back(b.lse[0]);
    }
  }
  std::vector<std::vector<float>> rows;  // [H][n_keys]
  std::vector<float> lse;                // [H]
};

}  // namespace

TEST(EnforcingController, RecordsHeldAndInactiveEntriesWhereverTheyLie) {
  const ModelShape shape = shape_of(1, 3, 3);
  const int P = 5000, S = 2;
  RowSpy spy;
  PrefillEvidence ev;
  EnforcingController live(spy, ev, shape, P, S);
  PositionSlots kv(1, 3);
  std::mt19937 rng(3);
  for (int p = 0; p <= P; ++p) {
    kv.append(0, 0, p);                                   // every position: one run
    if (p < 4 || p >= P - 1000) kv.append(0, 1, p);      // four sinks and a window
    if (rng() % 3 == 0 || p == P) kv.append(0, 2, p);    // scattered
  }
  for (int g = 0; g < 3; ++g) {
    const std::span<uint8_t> act = kv.active(0, g);
    for (size_t i = 0; i < act.size(); ++i) act[i] = rng() % 5 != 0;
  }
  live.before_attention(0, P, kv);
  for (int g = 0; g < 3; ++g) {
    std::vector<uint8_t> want(P + S, 0);  // [T]
    const std::span<const int32_t> held = kv.held(0, g);
    for (size_t i = 0; i < held.size(); ++i) want[held[i]] = kv.active(0, g)[i] ? 1 : 2;
    const uint8_t* got = live.kept().data() + static_cast<size_t>(g) * (P + S);  // step 0, layer 0
    EXPECT_EQ(std::vector<uint8_t>(got, got + P + S), want) << "KV head " << g;
  }
}

// KV heads that hold what head 0 holds get a copy of its row once its row is scattered: each
// step's rows must still be every head's own (heads alike, one flag apart, one position apart,
// and head 0 scattered, then one run).
TEST(EnforcingController, KeptRowsAreEachHeadsOwnWhereHeadsHoldAlike) {
  const int Hkv = 4, P = 6000, S = 4;
  const ModelShape shape = shape_of(2, Hkv, Hkv);
  RowSpy spy;
  PrefillEvidence ev;
  EnforcingController live(spy, ev, shape, P, S);
  PositionSlots kv(2, Hkv);
  std::mt19937 rng(5);
  for (int l = 0; l < 2; ++l)
    for (int p = 0; p < P; ++p)
      if (l == 1 || rng() % 2 == 0 || p == 7)  // layer 0 scattered, layer 1 one run
        for (int g = 0; g < Hkv; ++g) kv.append(l, g, p);
  for (int s = 0; s < S; ++s) {
    const int q = P + s;
    for (int l = 0; l < 2; ++l) {
      for (int g = 0; g < Hkv; ++g) kv.append(l, g, q);
      const auto held_of = [&](int g) { return kv.held(l, g); };
      // Head 2: head 0's positions, one flag apart; head 3: one position apart (from step 1 on).
      std::fill(kv.active(l, 2).begin(), kv.active(l, 2).end(), 1);
      kv.active(l, 2)[held_of(2).size() / 2] = s % 2 == 0;
      if (s == 1) {
        std::vector<uint8_t> keep(held_of(3).size(), 1);
        keep[held_of(3).size() / 3] = 0;
        kv.evict(l, 3, keep);
      }
      if (s == 2 && l == 0) {  // head 0 (and 1) one run from here on: written, not copied
        for (int g = 0; g < 2; ++g) {
          std::vector<uint8_t> keep(held_of(g).size(), 0);
          std::fill(keep.end() - 100, keep.end(), 1);
          kv.evict(l, g, keep);
        }
      }
      live.before_attention(l, q, kv);
      for (int g = 0; g < Hkv; ++g) {
        std::vector<uint8_t> want(P + S, 0);  // [T]
        const std::span<const int32_t> held = held_of(g);
        for (size_t i = 0; i < held.size(); ++i) want[held[i]] = kv.active(l, g)[i] ? 1 : 2;
        const uint8_t* got = live.kept().data() + ((static_cast<size_t>(s) * 2 + l) * Hkv + g) * (P + S);
        ASSERT_EQ(std::vector<uint8_t>(got, got + P + S), want) << "step " << s << " layer " << l << " KV head " << g;
      }
    }
  }
}

TEST(EnforcingController, HandsThePolicyRowsRenormalizedAsTheSimulatorDoes) {
  const ModelShape shape = shape_of(1, 2, 1);
  const int P = 3000, S = 1;
  RowSpy spy;
  PrefillEvidence ev;
  EnforcingController live(spy, ev, shape, P, S);
  PositionSlots kv(1, 1);
  std::vector<float> dense(P + 1, 0.0f);  // [T] a full row, zero where not held
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int p = 0; p <= P; ++p)
    if (p % 4 != 1) {
      kv.append(0, 0, p);
      dense[p] = unit(rng) / 700.0f;
    }
  const std::span<const int32_t> keys = kv.held(0, 0);
  std::vector<std::vector<float>> rows(2);  // [H][n_keys] the engine's rows
  std::vector<AttentionBlock> blocks;
  const float lse[2] = {0.5f, -1.0f};
  for (int h = 0; h < 2; ++h) {
    for (int32_t k : keys) rows[h].push_back(h == 0 ? dense[k] : 0.0f);  // head 1: nothing to share out
    blocks.push_back(AttentionBlock::decode_row(0, h, P, (int)keys.size(), keys.data(), rows[h].data(), &lse[h]));
  }
  live.after_attention(0, P, blocks, kv);
  ASSERT_EQ(spy.rows.size(), 2u);
  for (int h = 0; h < 2; ++h) {
    std::vector<float> full(P + 1, 0.0f);  // [T]
    for (size_t j = 0; j < keys.size(); ++j) full[keys[j]] = rows[h][j];
    std::vector<float> want(keys.size());
    const float want_lse = renormalize_row(full, lse[h], keys, want);
    EXPECT_EQ(spy.rows[h], want) << "head " << h;  // the same numbers, bit for bit
    EXPECT_EQ(spy.lse[h], want_lse) << "head " << h;
  }
  float sum = 0.0f;
  for (float v : spy.rows[0]) sum += v;
  EXPECT_NEAR(sum, 1.0f, 1e-4f);
  EXPECT_FLOAT_EQ(spy.rows[1][0], 1.0f / keys.size());  // a row of zeros spreads uniformly
}
