// Per-step analyses of a policy run, per (layer, KV head), measured at the moment of each
// decode attention against the full recorded rows: attention mass retained, top-k miss rate,
// kept / evicted / inactive counts, KV bytes, bytes freed under paged allocation, and the
// turnover of score-selected (heavy-hitter) sets between steps.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "analysis/shape.h"
#include "analysis/trace.h"

namespace kvs {

// Sum of full_row over `keys` (the attention mass a kept set retains).
float retained_mass(std::span<const float> full_row, std::span<const int32_t> keys);

// Fraction of `topk` positions whose attended[pos] is 0 (0 when topk is empty).
float topk_miss_fraction(std::span<const int32_t> topk, std::span<const uint8_t> attended);

// Bytes freed under paged allocation: positions [0, q_pos] form blocks of `block_size`; a
// complete block (its last position <= q_pos) is freed when none of its positions is held.
int64_t paged_bytes_freed(std::span<const int32_t> held, int q_pos, int block_size, int bytes_per_entry);

// 1 - |a ∩ b| / |a ∪ b| for ascending position lists (0 when both are empty).
float jaccard_distance(std::span<const int32_t> a, std::span<const int32_t> b);

// What every run's metrics read from a step's full rows, computed once per (layer, head) and
// shared by every policy of the step: the top-k key positions (per k; ties keep the newer
// position, as in the policies) and the row's total mass (1 within float32's rounding; float16
// rows, stored rounded, sum to 1 only within theirs).
class FullRowCache {
 public:
  void clear() {
    top_k_.clear();
    mass_.clear();
  }
  const std::vector<int32_t>& top_k(int layer, int head, int k, std::span<const float> row);
  float mass(int layer, int head, std::span<const float> row);

 private:
  std::unordered_map<uint64_t, std::vector<int32_t>> top_k_;
  std::unordered_map<uint64_t, float> mass_;
};

class RunMetrics {
 public:
  // budget <= 0 means "no budget": the top-k miss uses k = the whole context.
  RunMetrics(const ModelShape& shape, int n_steps, int T, int budget, int block_size, bool turnover);

  // Step `step`, (layer, kv_head) at the moment of attention by the query at q_pos. full_rows:
  // the group's G recorded rows (each [>= q_pos + 1], heads kv_head*G ...), or none (recall and
  // topk_miss NaN); held / active: the KV head's entries.
  void record(int step, int layer, int kv_head, int q_pos, std::span<const float* const> full_rows,
              std::span<const int32_t> held, std::span<const uint8_t> active, FullRowCache& rows);
  // Score-selected set of (layer, kv_head) after the eviction of `step` (step -1: after prefill).
  void record_scored_set(int step, int layer, int kv_head, std::span<const int32_t> set);
  // recall, topk_miss, kept, evicted, inactive, kv_bytes, paged_bytes_freed (+ hh_turnover),
  // each float32 [n_steps, L, Hkv].
  std::vector<NamedArray> take();

 private:
  size_t at(int step, int layer, int kv_head) const {
    return ((size_t)step * shape_.n_layers + layer) * shape_.n_kv_heads + kv_head;
  }
  ModelShape shape_;
  int n_steps_, budget_, block_size_;
  bool turnover_;
  std::vector<float> recall_, topk_miss_, kept_, evicted_, inactive_, kv_bytes_, paged_freed_,
      turnover_v_;                              // each [n_steps, L, Hkv]
  std::vector<std::vector<int32_t>> prev_set_;  // [L * Hkv] last score-selected set
  std::vector<uint8_t> attended_;               // [T] scratch mask of attended positions
  std::vector<int32_t> keys_;                   // scratch: attended positions
};

}  // namespace kvs
