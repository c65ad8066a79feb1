// Test support for engine tests that run the same tokens two ways (CPU and GPU, batched and
// step by step, reading decode rows or not): the captured attention rows compared row by row, a
// controller that skips a range of positions before every attention (as KVzip's scoring skips the
// context outside a chunk), hooks that read decode rows at some layers only, and controllers that
// ask for key rankings or group rows and check them against their rows.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "capture.h"
#include "inference/group_rows.h"
#include "inference/hooks.h"

namespace kvs::tiny {

// Every row of `want` has one in `got` for the same (layer, head, query position, decode) over the
// same keys, with probabilities within tol that sum to 1 (1e-5) and a log-sum-exp within 10 tol;
// `got` has no other rows.
inline void expect_same_rows(const Capture& want, const Capture& got, float tol) {
  ASSERT_EQ(want.rows.size(), got.rows.size());
  std::map<std::tuple<int, int, int, bool>, const CapturedRow*> index;
  for (const CapturedRow& r : got.rows) index[{r.layer, r.head, r.q_pos, r.decode}] = &r;
  for (const CapturedRow& r : want.rows) {
    const auto it = index.find({r.layer, r.head, r.q_pos, r.decode});
    ASSERT_NE(it, index.end()) << "no row for layer " << r.layer << " head " << r.head << " query " << r.q_pos;
    const CapturedRow& o = *it->second;
    ASSERT_EQ(r.keys, o.keys) << "layer " << r.layer << " head " << r.head << " query " << r.q_pos;
    double sum = 0;
    for (std::size_t j = 0; j < r.probs.size(); ++j) {
      EXPECT_NEAR(r.probs[j], o.probs[j], tol) << "layer " << r.layer << " head " << r.head << " query " << r.q_pos
                                               << " key " << r.keys[j];
      sum += o.probs[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_NEAR(r.lse, o.lse, 10 * tol);
  }
}

// Before each attention, every (layer, KV head) skips the held positions in [from, to).
class SkipPositions : public CacheController {
 public:
  SkipPositions(int from, int to) : from_(from), to_(to) {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots& kv) override {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const auto held = kv.held(layer, g);
      const auto active = kv.active(layer, g);
      for (std::size_t i = 0; i < held.size(); ++i) active[i] = held[i] < from_ || held[i] >= to_;
    }
  }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}

 private:
  int from_, to_;
};

// Forwards to `inner` but reads decode rows at odd layers only (needs_decode_rows); records how
// many rows each after_attention was given, in call order.
class OddLayersReadRows : public CacheController {
 public:
  explicit OddLayersReadRows(CacheController& inner) : inner_(inner) {}
  void after_prefill(int prompt_len, KvSlots& kv) override { inner_.after_prefill(prompt_len, kv); }
  void before_attention(int layer, int q_pos, KvSlots& kv) override { inner_.before_attention(layer, q_pos, kv); }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {
    given.push_back({layer, static_cast<int>(heads.size())});
    inner_.after_attention(layer, q_pos, heads, kv);
  }
  bool needs_decode_rows(int layer) const override { return layer % 2 == 1; }
  std::vector<std::pair<int, int>> given;  // (layer, rows given) per call

 private:
  CacheController& inner_;
};

// A Capture that reads no decode rows: it still gets the prompt's rows, the tokens and the logits.
class CaptureWithoutDecodeRows : public Capture {
 public:
  bool needs_decode_rows() const override { return false; }
};

// With `observer` and `controller` reading rows at odd layers only (as above), a run gives the
// controller no rows at even layers and all n_heads at odd ones, the observer no decode rows, and
// computes what `reads_all` (the same run with both reading every row) computed, logits bit for
// bit.
inline void expect_rows_only_where_read(const CaptureWithoutDecodeRows& observer, const OddLayersReadRows& controller,
                                        const Capture& reads_all, int n_heads, int decode_steps, int n_layers) {
  for (const CapturedRow& r : observer.rows) EXPECT_FALSE(r.decode) << "a decode row of layer " << r.layer;
  ASSERT_EQ(controller.given.size(), static_cast<std::size_t>(decode_steps) * n_layers);
  for (const auto& [layer, rows] : controller.given) EXPECT_EQ(rows, layer % 2 == 1 ? n_heads : 0) << "layer " << layer;
  EXPECT_EQ(observer.logits_pos, reads_all.logits_pos);
  EXPECT_EQ(observer.logits, reads_all.logits);
}

// The head-maxed logit of each position the heads attended (log p + lse), as rank_keys defines it.
inline std::map<int, float> head_max_logits(std::span<const AttentionBlock> heads) {
  std::map<int, float> z;
  for (const AttentionBlock& b : heads)
    for (int j = 0; j < b.n_keys; ++j) {
      const float v = std::log(b.probs[j]) + b.lse[0];
      const auto [it, fresh] = z.emplace(b.key(j), v);
      if (!fresh) it->second = std::fmax(it->second, v);
    }
  return z;
}

// `got` is the ranking r asks of heads, found here by sorting the attended positions below
// r.below by (head-maxed logit descending, position descending) and taking the first k, up to
// logits within `tol` of the k-th largest (a GPU's logf may differ from the host's by an ulp; 0
// on the emulation).
inline void expect_ranking_of(std::span<const AttentionBlock> heads, const KeyRanking& r,
                              std::span<const int32_t> got, float tol) {
  const std::map<int, float> z = head_max_logits(heads);
  std::vector<int32_t> want;  // candidates, then the ranked ones ascending
  for (const auto& [pos, v] : z)
    if (pos < r.below) want.push_back(pos);
  std::sort(want.begin(), want.end(), [&](int a, int b) { return z.at(a) > z.at(b) || (z.at(a) == z.at(b) && a > b); });
  want.resize(std::min<std::size_t>(want.size(), std::max(0, r.k)));
  std::sort(want.begin(), want.end());
  ASSERT_EQ(got.size(), want.size());
  if (std::equal(got.begin(), got.end(), want.begin())) return;
  float kth = INFINITY;
  for (int32_t p : want) kth = std::min(kth, z.at(p));
  std::vector<int32_t> differ;
  std::set_symmetric_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(differ));
  for (int32_t p : differ) {
    ASSERT_TRUE(z.count(p)) << "position " << p << " was not attended, layer " << heads[0].layer;
    EXPECT_NEAR(z.at(p), kth, tol) << "position " << p << " ranked differently, layer " << heads[0].layer;
  }
}

// Asks every layer for the k keys below `below` and forwards the rest to `inner` (which must read
// no rows: it gets none). Each ranking must arrive just before that layer's after_attention; with
// read_rows, it gets the rows as well and checks the ranking against them (expect_ranking_of).
class RankingSpy : public CacheController {
 public:
  RankingSpy(CacheController& inner, KeyRanking r, bool read_rows, float tol = 0.0f)
      : inner_(inner), r_(r), read_rows_(read_rows), tol_(tol) {}
  void after_prefill(int prompt_len, KvSlots& kv) override { inner_.after_prefill(prompt_len, kv); }
  void before_attention(int layer, int q_pos, KvSlots& kv) override { inner_.before_attention(layer, q_pos, kv); }
  bool needs_decode_rows(int) const override { return read_rows_; }
  KeyRanking key_ranking(int) const override { return r_; }
  void on_key_ranking(int layer, int q_pos, std::span<const int32_t> positions) override {
    EXPECT_FALSE(pending_) << "two rankings before an after_attention";
    pending_ = true;
    at_ = {layer, q_pos};
    rankings.emplace_back(positions.begin(), positions.end());
  }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {
    ASSERT_TRUE(pending_) << "no ranking before after_attention of layer " << layer;
    EXPECT_EQ(at_, std::make_pair(layer, q_pos));
    pending_ = false;
    EXPECT_EQ(heads.empty(), !read_rows_);
    EXPECT_TRUE(std::is_sorted(rankings.back().begin(), rankings.back().end()));
    for (int32_t p : rankings.back()) EXPECT_LT(p, r_.below);
    if (read_rows_) expect_ranking_of(heads, r_, rankings.back(), tol_);
    inner_.after_attention(layer, q_pos, {}, kv);
  }
  std::vector<std::vector<int32_t>> rankings;  // per (decode step, layer), in call order

 private:
  CacheController& inner_;
  KeyRanking r_;
  bool read_rows_;
  float tol_;
  bool pending_ = false;
  std::pair<int, int> at_;
};

// Asks every layer for group rows reduced by `how` and forwards the rest to `inner` (which must
// read no rows: it gets none). The group rows must arrive just before that layer's
// after_attention, one a KV head in order; with read_rows, it gets the rows as well and checks
// the group rows against the host's reduction of them (HostGroupRows): the same keys, values
// within tol of them (0: the same bits).
class GroupSpy : public CacheController {
 public:
  GroupSpy(CacheController& inner, ops::GroupReduce how, bool read_rows, float tol = 0.0f)
      : inner_(inner), how_(how), read_rows_(read_rows), tol_(tol) {}
  void after_prefill(int prompt_len, KvSlots& kv) override { inner_.after_prefill(prompt_len, kv); }
  void before_attention(int layer, int q_pos, KvSlots& kv) override { inner_.before_attention(layer, q_pos, kv); }
  bool needs_decode_rows(int) const override { return read_rows_; }
  std::optional<ops::GroupReduce> group_rows(int) const override { return how_; }
  void on_group_rows(int layer, int q_pos, std::span<const GroupRow> rows) override {
    EXPECT_FALSE(pending_) << "two sets of group rows before an after_attention";
    pending_ = true;
    at_ = {layer, q_pos};
    rows_ = rows;
    std::vector<std::vector<int32_t>>& k = keys.emplace_back();
    std::vector<std::vector<float>>& v = values.emplace_back();
    for (const GroupRow& r : rows) {
      std::vector<int32_t>& kg = k.emplace_back();
      for (int j = 0; j < r.n_keys; ++j) kg.push_back(r.key(j));
      v.emplace_back(r.values, r.values + r.n_keys);
    }
  }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {
    ASSERT_TRUE(pending_) << "no group rows before after_attention of layer " << layer;
    EXPECT_EQ(at_, std::make_pair(layer, q_pos));
    pending_ = false;
    EXPECT_EQ(heads.empty(), !read_rows_);
    const int n_kv = kv.n_kv_heads();
    ASSERT_EQ(static_cast<int>(rows_.size()), n_kv);
    for (int g = 0; g < n_kv; ++g) {
      EXPECT_EQ(rows_[g].kv_head, g);
      const std::span<const uint8_t> act = kv.active(layer, g);  // attended: the active entries
      EXPECT_EQ(keys.back()[g].size(), static_cast<std::size_t>(std::count(act.begin(), act.end(), 1)))
          << "layer " << layer << " KV head " << g;
    }
    if (read_rows_) {
      HostGroupRows host;
      const std::span<const GroupRow> want = host.reduce(heads, n_kv, how_);
      for (int g = 0; g < n_kv; ++g) {
        ASSERT_EQ(want[g].n_keys, rows_[g].n_keys);
        for (int j = 0; j < want[g].n_keys; ++j) {
          ASSERT_EQ(want[g].key(j), rows_[g].key(j));
          if (tol_ == 0.0f) {
            ASSERT_EQ(want[g].values[j], rows_[g].values[j]) << "layer " << layer << " KV head " << g << " key " << j;
          } else {
            ASSERT_NEAR(want[g].values[j], rows_[g].values[j], tol_) << "layer " << layer << " KV head " << g;
          }
        }
      }
    }
    inner_.after_attention(layer, q_pos, {}, kv);
  }
  // Per (decode step, layer), in call order: [n_kv][keys] positions and values.
  std::vector<std::vector<std::vector<int32_t>>> keys;
  std::vector<std::vector<std::vector<float>>> values;

 private:
  CacheController& inner_;
  ops::GroupReduce how_;
  bool read_rows_;
  float tol_;
  bool pending_ = false;
  std::pair<int, int> at_;
  std::span<const GroupRow> rows_;
};

}  // namespace kvs::tiny
