// Test support for engine tests that run the same tokens two ways (CPU and GPU, batched and
// step by step): the captured attention rows compared row by row, and a controller that skips a
// range of positions before every attention (as KVzip's scoring skips the context outside a chunk).
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "capture.h"
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

}  // namespace kvs::tiny
