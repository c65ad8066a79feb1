// What prefill-time policies read from the prompt's attention, at any prompt length:
// per-key column sums (H2O), the last W query rows (SnapKV family, TOVA), their log-sum-exp,
// and optional externally computed per-KV-head key scores (KVzip). Filled live by
// PrefillReducer (an AttentionObserver) or read back from a trace.
#pragma once
#include <cstddef>
#include <vector>

#include "analysis/shape.h"
#include "inference/hooks.h"

namespace kvs {

struct PrefillEvidence {
  ModelShape shape;
  int prompt_len = 0;               // P
  int window = 0;                   // W = min(requested window, P)
  std::vector<float> colsum;        // [L, H, P] sum over the P prompt queries of A[q, key]
  std::vector<float> window_rows;   // [L, H, W, P] rows of queries P-W..P-1 (0 past the diagonal)
  std::vector<float> window_lse;    // [L, H, W] log-sum-exp of those rows' scaled logits
  std::vector<float> key_scores;    // [L, Hkv, P] extra scores (KVzip); empty when absent

  const float* colsum_at(int l, int h) const { return colsum.data() + ((size_t)l * shape.n_heads + h) * prompt_len; }
  // Row w of the window (query position P-W+w).
  const float* window_row(int l, int h, int w) const {
    return window_rows.data() + (((size_t)l * shape.n_heads + h) * window + w) * prompt_len;
  }
};

// Accumulates PrefillEvidence from the engine's prefill attention blocks, or takes it from the
// engine's own reductions (on_prefill_summary).
class PrefillReducer : public AttentionObserver {
 public:
  PrefillReducer(const ModelShape& shape, int window_request);
  void on_begin(const ModelConfig& config, std::span<const int> prompt) override;
  void on_attention(const AttentionBlock& block) override;
  PrefillNeed prefill_need() const override { return {false, window_request_}; }
  void on_prefill_summary(const PrefillSummary& summary) override;
  const PrefillEvidence& evidence() const { return ev_; }
  PrefillEvidence& evidence() { return ev_; }
 private:
  int window_request_;
  PrefillEvidence ev_;
};

}  // namespace kvs
