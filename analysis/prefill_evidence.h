// What prefill-time policies read from the prompt's attention, at any prompt length:
// per-key column sums (H2O), the last W query rows (SnapKV family, TOVA), their log-sum-exp,
// optional externally computed per-KV-head key scores (KVzip), and optionally the block-pooled
// overview of the whole map (what the attention view shows when the map was not kept). Filled
// live by PrefillReducer (an AttentionObserver) or read back from a trace.
#pragma once
#include <cstddef>
#include <cstdint>
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
  int pool_block = 0;               // positions per pooled cell side; 0: no pooled map
  int n_pool = 0;                   // nb = ceil(P / pool_block)
  std::vector<float> pooled;        // [L, H, nb, nb] (PrefillSummary::pooled); empty when absent

  const float* colsum_at(int l, int h) const { return colsum.data() + ((size_t)l * shape.n_heads + h) * prompt_len; }
  // Row w of the window (query position P-W+w).
  const float* window_row(int l, int h, int w) const {
    return window_rows.data() + (((size_t)l * shape.n_heads + h) * window + w) * prompt_len;
  }
  const float* pooled_at(int l, int h) const { return pooled.data() + ((size_t)l * shape.n_heads + h) * n_pool * n_pool; }
};

// Pooled cells' side (positions) for a P-query map over L x H heads: the smallest block whose
// map has at most kMaxPoolCells per side and fits `budget_bytes` in fp32 over all heads.
inline constexpr int kMaxPoolCells = 512;
int pool_block_for(int P, int L, int H, std::size_t budget_bytes);

// Accumulates PrefillEvidence from the engine's prefill attention blocks, or takes it from the
// engine's own reductions (on_prefill_summary). pool_block_request > 0 adds the pooled map; a
// summary may bring a coarser one (another observer asked for it), which is then kept.
class PrefillReducer : public AttentionObserver {
 public:
  PrefillReducer(const ModelShape& shape, int window_request, int pool_block_request = 0);
  void on_begin(const ModelConfig& config, std::span<const int> prompt) override;
  void on_attention(const AttentionBlock& block) override;
  PrefillNeed prefill_need() const override { return {false, window_request_, pool_block_request_}; }
  bool needs_decode_rows() const override { return false; }  // the prompt's attention only
  void on_prefill_summary(const PrefillSummary& summary) override;
  const PrefillEvidence& evidence() const { return ev_; }
  PrefillEvidence& evidence() { return ev_; }
  // Bytes of the evidence on_begin sizes for a prompt of `prompt_len` tokens (before a summary
  // brings a coarser pooled map).
  uint64_t bytes_for(int prompt_len) const;
 private:
  void size_pooled(int pool_block);

  int window_request_;
  int pool_block_request_;
  PrefillEvidence ev_;
};

}  // namespace kvs
