// The controller a live run attaches to the engine: it drives a policy (real eviction), hands it
// the engine's rows renormalized over the attended keys exactly as the simulator renormalizes
// recorded rows, and records the (held, active) state at every decode attention as the kept set.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "analysis/kept_row.h"
#include "analysis/policy.h"
#include "analysis/prefill_evidence.h"
#include "inference/hooks.h"

namespace kvs {

class EnforcingController : public CacheController {
 public:
  // A run of S decode steps after a P-token prompt; `evidence` is what the policy reads at
  // prefill end (key_scores below are put into it then).
  EnforcingController(Policy& policy, PrefillEvidence& evidence, const ModelShape& shape, int P, int S);

  std::vector<float> key_scores;  // [L, Hkv, P] KVzip scores to hand over at prefill end

  void after_prefill(int prompt_len, KvSlots& kv) override;
  void before_attention(int layer, int q_pos, KvSlots& kv) override;
  bool needs_decode_rows(int layer) const override { return policy_.needs_decode_rows(layer); }
  // The engine ranks its own rows, which are the recorded ones the simulator ranks.
  KeyRanking key_ranking(int layer) const override { return policy_.key_ranking(layer); }
  void on_key_ranking(int layer, int q_pos, std::span<const int32_t> positions) override {
    policy_.on_key_ranking(layer, q_pos, positions);
  }
  // Likewise the group rows: the engine's reduction renormalizes each row as the simulator does.
  std::optional<ops::GroupReduce> group_rows(int layer) const override { return policy_.group_rows(layer); }
  void on_group_rows(int layer, int q_pos, std::span<const GroupRow> rows) override {
    policy_.on_group_rows(layer, q_pos, rows);
  }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override;

  // [S, L, Hkv, T] per position: 1 held and active, 2 held but inactive, 0 not held.
  std::vector<uint8_t>& kept() { return kept_; }

 private:
  Policy& policy_;
  PrefillEvidence& evidence_;
  ModelShape shape_;
  int P_, S_, T_;
  std::vector<uint8_t> kept_;              // [S, L, Hkv, T]
  LayerKeptRows kept_rows_;                // writes a step's layer of kept_
  std::vector<AttentionBlock> renormed_;   // [H] the rows handed to the policy
  std::vector<std::vector<float>> probs_;  // [H][n_keys]
  std::vector<float> lse_;                 // [H]
};

}  // namespace kvs
