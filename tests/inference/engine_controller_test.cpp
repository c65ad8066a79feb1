// A CacheController drives real eviction: entries leave the per-(layer, KV head) cache, kv_bytes
// shrinks, later entries take the freed rows, decode attends only the held (and active) entries,
// and the results match a naive forward that masks the same keys — with original positions and
// with rope_in_cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "capture.h"
#include "compare_rows.h"
#include "inference/engine.h"
#include "inference/kv_store.h"
#include "tiny_model.h"

namespace kvs {
namespace {

using tiny::Capture;
using tiny::CapturedRow;

const std::vector<int> kPrompt = {1, 9, 14, 3, 27, 6, 35, 12};  // P = 8
const std::vector<int> kDecoded = {21, 4, 30, 8, 17};

// Keeps the first `first` and the last `last` held entries of every (layer, KV head), after
// prefill and after each decode attention; records what it saw.
class KeepEnds : public CacheController {
 public:
  KeepEnds(int first, int last) : first_(first), last_(last) {}
  void after_prefill(int prompt_len, KvSlots& kv) override { trim(kv, -1); }
  void before_attention(int layer, int q_pos, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      held_before.push_back(static_cast<int>(kv.held(layer, g).size()));
      EXPECT_EQ(kv.held(layer, g).back(), q_pos);  // its own key is held and active
      EXPECT_EQ(kv.active(layer, g).back(), 1);
    }
  }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads,
                       KvSlots& kv) override {
    if (!heads.empty()) {
      EXPECT_EQ(static_cast<int>(heads.size()), 4);  // none where a wrapper reads none
    }
    for (const AttentionBlock& b : heads) {
      EXPECT_EQ(b.layer, layer);
      EXPECT_EQ(b.q_pos0, q_pos);
      EXPECT_TRUE(b.decode);
    }
    trim(kv, layer);
  }

  std::vector<int> held_before;  // per (decode step, layer, KV head)

 private:
  void trim(KvSlots& kv, int only_layer) {
    for (int l = 0; l < kv.n_layers(); ++l) {
      if (only_layer >= 0 && l != only_layer) continue;
      for (int g = 0; g < kv.n_kv_heads(); ++g) {
        const int n = static_cast<int>(kv.held(l, g).size());
        std::vector<uint8_t> keep(n, 0);
        for (int i = 0; i < n; ++i) keep[i] = i < first_ || i >= n - last_;
        kv.evict(l, g, keep);
      }
    }
  }
  int first_, last_;
};

// Naive forward of the same run: decode queries attend the first `first` positions, their own key
// and the `last` - 1 keys before it.
tiny::Reference keep_ends_reference(const Model& m, int first, int last, bool rope_by_slot) {
  std::vector<int> tokens = kPrompt;
  tokens.insert(tokens.end(), kDecoded.begin(), kDecoded.end());
  const int P = static_cast<int>(kPrompt.size());
  auto attends = [=](int, int, int q, int k) { return q < P || k < first || k >= q - last; };
  return tiny::reference_forward(m, tokens, attends, rope_by_slot);
}

void run_keep_ends_on(const Model& m, int first, int last, bool rope_in_cache, int threads) {
  const ModelConfig& c = m.config;
  EngineOptions opt;
  opt.rope_in_cache = rope_in_cache;
  opt.n_threads = threads;
  Engine e(m, opt);
  Capture cap;
  KeepEnds ctl(first, last);
  e.set_observer(&cap);
  e.set_controller(&ctl);
  const std::size_t entry = 2 * c.head_dim * sizeof(float);
  const std::size_t per_pos = entry * c.n_layers * c.n_kv_heads;
  std::span<const float> lg = e.prefill(kPrompt);
  std::vector<float> logits(lg.begin(), lg.end());
  EXPECT_EQ(e.peak_kv_bytes(), kPrompt.size() * per_pos);  // full prompt before compression
  const std::size_t budget = (first + last) * per_pos;
  EXPECT_EQ(e.kv_bytes(), budget);  // then first + last positions per head
  const int P = static_cast<int>(kPrompt.size());
  std::vector<int32_t> kept;        // [first + last]
  for (int i = 0; i < first; ++i) kept.push_back(i);
  for (int i = P - last; i < P; ++i) kept.push_back(i);
  for (int l = 0; l < c.n_layers; ++l) {
    for (int g = 0; g < c.n_kv_heads; ++g) {
      const auto held = e.slots().held(l, g);
      EXPECT_EQ(std::vector<int32_t>(held.begin(), held.end()), kept);
    }
  }
  for (int t : kDecoded) {
    lg = e.decode(t);
    logits.assign(lg.begin(), lg.end());
    EXPECT_EQ(e.kv_bytes(), budget);
  }
  EXPECT_EQ(e.peak_kv_bytes(), kPrompt.size() * per_pos);
  for (int held : ctl.held_before) EXPECT_EQ(held, first + last + 1);
  // No row moved: each step's entry took a row an eviction freed, so the heads' entries sit out
  // of row order and no head used more rows than the prompt's.
  const auto& store = dynamic_cast<const KvStore&>(e.slots());
  for (int l = 0; l < c.n_layers; ++l) {
    for (int g = 0; g < c.n_kv_heads; ++g) {
      EXPECT_FALSE(store.rows_in_order(l, g));
      EXPECT_EQ(store.rows_used(l, g), P);
    }
  }

  const tiny::Reference ref = keep_ends_reference(m, first, last, rope_in_cache);
  int n_decode = 0;
  for (const CapturedRow& r : cap.rows) {
    if (!r.decode) continue;
    ++n_decode;
    ASSERT_EQ(static_cast<int>(r.keys.size()), first + last + 1);
    for (int j = 0; j < first + last + 1; ++j) {
      EXPECT_EQ(r.keys[j], j < first ? j : r.q_pos - (first + last) + j);
      EXPECT_NEAR(r.probs[j], ref.a(c, r.layer, r.head, r.q_pos, r.keys[j]), 1e-5)
          << "layer " << r.layer << " head " << r.head << " q " << r.q_pos;
    }
  }
  EXPECT_EQ(n_decode, static_cast<int>(kDecoded.size()) * c.n_layers * c.n_heads);
  const int V = c.vocab_size;
  for (int i = 0; i < V; ++i) {
    EXPECT_NEAR(logits[i], ref.logits[static_cast<std::size_t>(ref.T - 1) * V + i], 1e-4);
  }
}

// On one thread and on a team of three (the hooks run on thread 0 while the others compute).
void run_keep_ends(const Model& m, int first, int last, bool rope_in_cache) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    run_keep_ends_on(m, first, last, rope_in_cache, threads);
  }
}

TEST(EngineController, EvictionShrinksTheCacheAndAttentionFollowsIt) {
  run_keep_ends(tiny::random_model(tiny::tiny_config(), 31), 0, 3, false);
  run_keep_ends(tiny::random_model(tiny::tiny_config(), 35), 2, 2, false);
}

TEST(EngineController, RopeInCacheRotatesBySlotInsideTheCache) {
  run_keep_ends(tiny::random_model(tiny::tiny_config(), 32), 0, 3, true);
  run_keep_ends(tiny::random_model(tiny::tiny_config(), 36), 1, 3, true);
}

TEST(EngineController, RopeInCacheDiffersFromOriginalPositionsWithAGap) {
  // A contiguous window keeps relative distances, so only a gap (kept first entry) tells the
  // two position conventions apart.
  const Model m = tiny::random_model(tiny::tiny_config(), 33);
  std::vector<std::vector<float>> out;
  for (bool shifted : {false, true}) {
    EngineOptions opt;
    opt.rope_in_cache = shifted;
    Engine e(m, opt);
    KeepEnds ctl(1, 3);
    e.set_controller(&ctl);
    e.prefill(kPrompt);
    const auto lg = e.decode(kDecoded[0]);
    out.emplace_back(lg.begin(), lg.end());
  }
  float diff = 0;
  for (std::size_t i = 0; i < out[0].size(); ++i) diff = std::max(diff, std::abs(out[0][i] - out[1][i]));
  EXPECT_GT(diff, 1e-4f);
}

// Marks every other held entry of layer 0 inactive before attention (they stay held).
class SkipOdd : public CacheController {
 public:
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      auto held = kv.held(layer, g);
      auto active = kv.active(layer, g);
      for (std::size_t i = 0; i < held.size(); ++i) active[i] = (layer != 0 || held[i] % 2 == 0 || i + 1 == held.size());
    }
  }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
};

TEST(EngineController, InactiveEntriesAreSkippedButKept) {
  const Model m = tiny::random_model(tiny::tiny_config(), 34);
  Engine e(m);
  Capture cap;
  SkipOdd ctl;
  e.set_observer(&cap);
  e.set_controller(&ctl);
  e.prefill(kPrompt);
  const int P = static_cast<int>(kPrompt.size());
  const int q = P;  // one decode step
  const auto lg = e.decode(kDecoded[0]);
  std::vector<int> tokens = kPrompt;
  tokens.push_back(kDecoded[0]);
  auto attends = [P](int l, int, int qp, int k) { return qp < P || l != 0 || k % 2 == 0 || k == qp; };
  const tiny::Reference ref = tiny::reference_forward(m, tokens, attends);
  const ModelConfig& c = m.config;
  for (const CapturedRow& r : cap.rows) {
    if (!r.decode) continue;
    for (std::size_t j = 0; j < r.keys.size(); ++j) {
      if (r.layer == 0) {
        EXPECT_TRUE(r.keys[j] % 2 == 0 || r.keys[j] == q);
      }
      EXPECT_NEAR(r.probs[j], ref.a(c, r.layer, r.head, q, r.keys[j]), 1e-5);
    }
    EXPECT_EQ(r.keys.size(), r.layer == 0 ? 5u : 9u);  // {0,2,4,6,8} or 0..8
  }
  EXPECT_EQ(e.kv_bytes(), static_cast<std::size_t>(P + 1) * 2 * c.head_dim * 4 * c.n_layers * c.n_kv_heads);
  for (int i = 0; i < c.vocab_size; ++i) EXPECT_NEAR(lg[i], ref.logits[static_cast<std::size_t>(P) * c.vocab_size + i], 1e-4);
}

// Throws from before_attention (or after_attention) of layer 1 on the `at`-th decode step.
class ThrowsAt : public CacheController {
 public:
  ThrowsAt(int at, bool before) : at_(at), before_(before) {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots&) override { maybe_throw(layer, true); }
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots&) override {
    maybe_throw(layer, false);
    if (layer == 1) ++steps_;
  }

 private:
  void maybe_throw(int layer, bool before) {
    if (layer == 1 && before == before_ && steps_ == at_) throw std::runtime_error("policy failed");
  }
  int at_, steps_ = 0;
  bool before_;
};

// A hook's exception leaves decode() as it was thrown, whether thread 0 ran it alone or beside
// a team inside the token's parallel region; the engine decodes normally afterwards.
TEST(EngineController, HookExceptionsLeaveDecodeOnAnyThreadCount) {
  const Model m = tiny::random_model(tiny::tiny_config(), 36);
  for (int threads : {1, 3}) {
    for (bool before : {true, false}) {
      EngineOptions opt;
      opt.n_threads = threads;
      Engine e(m, opt);
      ThrowsAt ctl(2, before);
      e.set_controller(&ctl);
      e.prefill(kPrompt);
      e.decode(kDecoded[0]);
      e.decode(kDecoded[1]);
      try {
        e.decode(kDecoded[2]);
        ADD_FAILURE() << "no exception, " << threads << " threads";
      } catch (const std::runtime_error& err) {
        EXPECT_STREQ(err.what(), "policy failed");
      }
      e.set_controller(nullptr);
      Engine fresh(m, opt);
      const auto want = fresh.prefill(kPrompt);
      const std::vector<float> expected(want.begin(), want.end());
      const auto got = e.prefill(kPrompt);
      EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expected);
      const auto a = e.decode(kDecoded[0]);
      const std::vector<float> after(a.begin(), a.end());
      const auto b = fresh.decode(kDecoded[0]);
      EXPECT_EQ(after, std::vector<float>(b.begin(), b.end()));
    }
  }
}

// Hooks that read decode rows at some layers only (the positional policies read none, OmniKV its
// filter layers') get none elsewhere, and the run is the one they would have had reading all.
TEST(EngineController, HooksGetDecodeRowsOnlyWhereTheyReadThem) {
  const Model m = tiny::random_model(tiny::tiny_config(), 31);
  const ModelConfig& c = m.config;
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    EngineOptions opt;
    opt.n_threads = threads;
    auto run = [&](AttentionObserver& observer, CacheController& controller) {
      Engine e(m, opt);
      e.set_observer(&observer);
      e.set_controller(&controller);
      e.prefill(kPrompt);
      for (int t : kDecoded) e.decode(t);
    };
    Capture reads_all;
    KeepEnds all_rows(2, 3), inner(2, 3);
    run(reads_all, all_rows);
    tiny::CaptureWithoutDecodeRows observer;
    tiny::OddLayersReadRows controller(inner);
    run(observer, controller);
    tiny::expect_rows_only_where_read(observer, controller, reads_all, c.n_heads, static_cast<int>(kDecoded.size()),
                                      c.n_layers);
  }
}

// Prefills kPrompt and decodes kDecoded on `threads` threads under `controller`.
void run_controlled(const Model& m, int threads, CacheController& controller) {
  EngineOptions opt;
  opt.n_threads = threads;
  Engine e(m, opt);
  e.set_controller(&controller);
  e.prefill(kPrompt);
  for (int t : kDecoded) e.decode(t);
}

// A controller's key ranking arrives before each decode after_attention, ranks the keys each
// layer attended below the prompt's end by their head-maxed logit (checked against sorting them:
// RankingSpy), holds fewer than k once fewer such keys are left, and is the same whether the
// controller reads the rows or not.
TEST(EngineController, KeyRankingsRankTheAttendedKeysBeforeAfterAttention) {
  const Model m = tiny::random_model(tiny::tiny_config(), 33);
  const int P = static_cast<int>(kPrompt.size());
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    KeepEnds a(2, 4), b(2, 4);
    tiny::RankingSpy reads(a, {3, P}, true), blind(b, {3, P}, false);
    run_controlled(m, threads, reads);
    run_controlled(m, threads, blind);
    ASSERT_EQ(reads.rankings.size(), kDecoded.size() * m.config.n_layers);
    EXPECT_EQ(reads.rankings, blind.rankings);
    EXPECT_EQ(reads.rankings.front().size(), 3u);  // 0, 1, 4..7 held below P
    EXPECT_EQ(reads.rankings.back(), (std::vector<int32_t>{0, 1}));  // only the kept first two left
  }
}

// A controller's group rows arrive before each decode after_attention, one a KV head over the keys
// it attended, the bits of the host's reduction of the rows the controller would get (GroupSpy),
// and the same whether the controller reads the rows or not.
TEST(EngineController, GroupRowsReduceTheAttendedRowsBeforeAfterAttention) {
  const Model m = tiny::random_model(tiny::tiny_config(), 33);
  for (ops::GroupReduce how : {ops::GroupReduce::Mean, ops::GroupReduce::Max, ops::GroupReduce::Sum}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, reduce " + std::to_string(static_cast<int>(how)));
      KeepEnds a(2, 4), b(2, 4);
      tiny::GroupSpy reads(a, how, true), blind(b, how, false);
      run_controlled(m, threads, reads);
      run_controlled(m, threads, blind);
      ASSERT_EQ(reads.values.size(), kDecoded.size() * m.config.n_layers);
      EXPECT_EQ(reads.keys, blind.keys);
      EXPECT_EQ(reads.values, blind.values);
      // The last step attends the kept first two and last four, and its own key.
      EXPECT_EQ(reads.keys.back()[1], (std::vector<int32_t>{0, 1, 8, 9, 10, 11, 12}));
    }
  }
}

}  // namespace
}  // namespace kvs
