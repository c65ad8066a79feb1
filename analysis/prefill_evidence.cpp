// PrefillReducer: folds the engine's prefill attention blocks into PrefillEvidence (per-key
// column sums, the last W query rows with their log-sum-exp, the pooled map when asked for).
// Decode blocks are ignored.
#include "analysis/prefill_evidence.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "inference/model.h"
#include "kernels/capture.h"

namespace kvs {

int pool_block_for(int P, int L, int H, std::size_t budget_bytes) {
  const auto fits = [&](int block) {
    const std::size_t nb = (std::size_t)(P + block - 1) / block;
    return nb <= (std::size_t)kMaxPoolCells && (std::size_t)L * H * nb * nb * sizeof(float) <= budget_bytes;
  };
  int block = 1;
  while (block < P && !fits(block)) ++block;
  return block;
}

PrefillReducer::PrefillReducer(const ModelShape& shape, int window_request, int pool_block_request)
    : window_request_(window_request), pool_block_request_(pool_block_request) {
  if (window_request < 1) throw std::invalid_argument("PrefillReducer: window must be at least 1");
  if (pool_block_request < 0) throw std::invalid_argument("PrefillReducer: pool block must not be negative");
  ev_.shape = shape;
}

void PrefillReducer::size_pooled(int pool_block) {
  ev_.pool_block = pool_block;
  ev_.n_pool = pool_block > 0 ? (ev_.prompt_len + pool_block - 1) / pool_block : 0;
  const size_t nb = ev_.n_pool;
  ev_.pooled.assign((size_t)ev_.shape.n_layers * ev_.shape.n_heads * nb * nb, 0.0f);  // [L, H, nb, nb]
}

void PrefillReducer::on_begin(const ModelConfig& config, std::span<const int> prompt) {
  ev_.shape.n_layers = config.n_layers;
  ev_.shape.n_heads = config.n_heads;
  ev_.shape.n_kv_heads = config.n_kv_heads;
  ev_.shape.head_dim = config.head_dim;
  const size_t L = config.n_layers, H = config.n_heads, P = prompt.size();
  ev_.prompt_len = (int)P;
  ev_.window = std::min(window_request_, (int)P);
  const size_t W = ev_.window;
  ev_.colsum.assign(L * H * P, 0.0f);          // [L, H, P]
  ev_.window_rows.assign(L * H * W * P, 0.0f);  // [L, H, W, P]
  ev_.window_lse.assign(L * H * W, 0.0f);       // [L, H, W]
  ev_.key_scores.clear();
  size_pooled(pool_block_request_);
}

uint64_t PrefillReducer::bytes_for(int prompt_len) const {
  const uint64_t LH = static_cast<uint64_t>(ev_.shape.n_layers) * ev_.shape.n_heads, P = prompt_len;
  const uint64_t W = std::min(window_request_, prompt_len);
  const uint64_t nb = pool_block_request_ > 0 ? (P + pool_block_request_ - 1) / pool_block_request_ : 0;
  return LH * (P + W * P + W + nb * nb) * sizeof(float);  // colsum, window_rows, window_lse, pooled
}

void PrefillReducer::on_prefill_summary(const PrefillSummary& s) {
  const int H = ev_.shape.n_heads, P = ev_.prompt_len, W = ev_.window;
  if (s.layer < 0 || s.layer >= ev_.shape.n_layers || s.head < 0 || s.head >= H)
    throw std::logic_error("PrefillReducer: summary for layer " + std::to_string(s.layer) + " head " +
                           std::to_string(s.head) + " outside the model");
  if (s.prompt_len != P || s.window < W)
    throw std::logic_error("PrefillReducer: summary of " + std::to_string(s.prompt_len) + " queries with window " +
                           std::to_string(s.window) + " does not cover " + std::to_string(P) + " and " +
                           std::to_string(W));
  const size_t lh = (size_t)s.layer * H + s.head;
  std::copy_n(s.colsum, P, ev_.colsum.data() + lh * P);
  // The summary's last W rows are this evidence's window.
  const size_t skip = (size_t)(s.window - W);
  std::copy_n(s.window_rows + skip * P, (size_t)W * P, ev_.window_rows.data() + lh * W * P);
  std::copy_n(s.window_lse + skip, W, ev_.window_lse.data() + lh * W);
  if (pool_block_request_ > 0 && s.pool_block <= 0)
    throw std::logic_error("PrefillReducer: summary without the pooled map it asked for");
  if (s.pool_block > 0) {
    if (s.pool_block != ev_.pool_block) size_pooled(s.pool_block);
    const size_t cells = (size_t)ev_.n_pool * ev_.n_pool;
    std::copy_n(s.pooled, cells, ev_.pooled.data() + lh * cells);
  }
}

void PrefillReducer::on_attention(const AttentionBlock& b) {
  if (b.decode) return;
  const int H = ev_.shape.n_heads, P = ev_.prompt_len, W = ev_.window;
  if (b.layer < 0 || b.layer >= ev_.shape.n_layers || b.head < 0 || b.head >= H)
    throw std::logic_error("PrefillReducer: block for layer " + std::to_string(b.layer) + " head " +
                           std::to_string(b.head) + " outside the model");
  float* colsum = ev_.colsum.data() + ((size_t)b.layer * H + b.head) * P;  // [P]
  if (ev_.pool_block > 0) {
    if (b.key_pos) throw std::logic_error("PrefillReducer: prefill block over scattered keys");
    float* pooled = ev_.pooled.data() + ((size_t)b.layer * H + b.head) * ev_.n_pool * ev_.n_pool;  // [nb, nb]
    ops::pool_add(pooled, b.probs, 1, b.n_q, b.n_keys, b.n_keys, b.q_pos0, P, ev_.pool_block);
  }
  const int first_window_row = P - W;
  for (int r = 0; r < b.n_q; ++r) {
    const int q = b.q_pos0 + r;
    if (q < 0 || q >= P) continue;
    const float* row = b.probs + (size_t)r * b.n_keys;  // [n_keys]
    float* window_row = nullptr;                        // [P] or none
    if (q >= first_window_row) {
      const size_t w = q - first_window_row;
      window_row = ev_.window_rows.data() + (((size_t)b.layer * H + b.head) * W + w) * P;
      ev_.window_lse[((size_t)b.layer * H + b.head) * W + w] = b.lse ? b.lse[r] : 0.0f;
    }
    if (!b.key_pos) {  // keys 0..n_keys-1: the common case, vectorized
      const int n = std::min(b.n_keys, P);
#pragma omp simd
      for (int k = 0; k < n; ++k) colsum[k] += row[k];
      if (window_row) std::copy_n(row, n, window_row);
      continue;
    }
    for (int j = 0; j < b.n_keys; ++j) {
      const int k = b.key_pos[j];
      if (k < 0 || k >= P) continue;
      colsum[k] += row[j];
      if (window_row) window_row[k] = row[j];
    }
  }
}

}  // namespace kvs
