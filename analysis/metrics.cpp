// Per-step run metrics (see metrics.h for definitions).
#include "analysis/metrics.h"

#include <algorithm>
#include <limits>

#include "analysis/policy_util.h"

namespace kvs {

float retained_mass(std::span<const float> full_row, std::span<const int32_t> keys) {
  float s = 0.0f;
  for (int32_t k : keys) s += full_row[k];
  return s;
}

float topk_miss_fraction(std::span<const int32_t> topk, std::span<const uint8_t> attended) {
  if (topk.empty()) return 0.0f;
  int miss = 0;
  for (int32_t p : topk) miss += attended[p] ? 0 : 1;
  return (float)miss / (float)topk.size();
}

int64_t paged_bytes_freed(std::span<const int32_t> held, int q_pos, int block_size, int bytes_per_entry) {
  const int n_blocks = (q_pos + 1) / block_size;  // complete blocks only
  std::vector<uint8_t> used(n_blocks, 0);         // [n_blocks] block holds a position
  for (int32_t p : held)
    if (p / block_size < n_blocks) used[p / block_size] = 1;
  int64_t freed = 0;
  for (uint8_t u : used) freed += u ? 0 : 1;
  return freed * block_size * bytes_per_entry;
}

float jaccard_distance(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t i = 0, j = 0, both = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++both;
      ++i;
      ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  const size_t uni = a.size() + b.size() - both;
  return uni == 0 ? 0.0f : 1.0f - (float)both / (float)uni;
}

const std::vector<int32_t>& FullRowCache::top_k(int layer, int head, int k, std::span<const float> row) {
  const uint64_t key = ((uint64_t)layer << 48) ^ ((uint64_t)head << 32) ^ (uint32_t)k;
  auto it = top_k_.find(key);
  if (it != top_k_.end()) return it->second;
  std::vector<int32_t>& out = top_k_[key];
  for (int i : top_k_indices(row, k)) out.push_back(i);
  return out;
}

float FullRowCache::mass(int layer, int head, std::span<const float> row) {
  const uint64_t key = ((uint64_t)layer << 32) ^ (uint32_t)head;
  auto it = mass_.find(key);
  if (it != mass_.end()) return it->second;
  double sum = 0.0;
  for (float p : row) sum += p;
  return mass_[key] = (float)sum;
}

RunMetrics::RunMetrics(const ModelShape& shape, int n_steps, int T, int budget, int block_size, bool turnover)
    : shape_(shape), n_steps_(n_steps), budget_(budget), block_size_(block_size), turnover_(turnover) {
  const size_t n = (size_t)n_steps * shape.n_layers * shape.n_kv_heads;
  for (auto* v : {&recall_, &topk_miss_, &kept_, &evicted_, &inactive_, &kv_bytes_, &paged_freed_})
    v->assign(n, 0.0f);
  if (turnover) turnover_v_.assign(n, 0.0f);
  prev_set_.resize((size_t)shape.n_layers * shape.n_kv_heads);
  attended_.assign(T, 0);
}

void RunMetrics::record(int step, int layer, int kv_head, int q_pos, std::span<const float* const> full_rows,
                        std::span<const int32_t> held, std::span<const uint8_t> active, FullRowCache& rows) {
  keys_.clear();
  for (size_t i = 0; i < held.size(); ++i)
    if (active[i]) keys_.push_back(held[i]);
  for (int32_t p : keys_) attended_[p] = 1;
  const int ctx = q_pos + 1;
  const int k = budget_ > 0 ? std::min(budget_, ctx) : ctx;
  const int G = (int)full_rows.size();
  float mass = 0.0f, miss = 0.0f;
  for (int i = 0; i < G; ++i) {
    std::span<const float> row(full_rows[i], ctx);
    // The share of the row's mass: a float16 row's rounding put full's recall at 1.0002.
    const float total = rows.mass(layer, kv_head * G + i, row);
    mass += total > 0.0f ? retained_mass(row, keys_) / total : 0.0f;
    miss += topk_miss_fraction(rows.top_k(layer, kv_head * G + i, k, row), attended_);
  }
  for (int32_t p : keys_) attended_[p] = 0;
  const size_t a = at(step, layer, kv_head);
  const float nan = std::numeric_limits<float>::quiet_NaN();  // no rows to measure against
  recall_[a] = G > 0 ? mass / (float)G : nan;
  topk_miss_[a] = G > 0 ? miss / (float)G : nan;
  kept_[a] = (float)held.size();
  evicted_[a] = (float)(ctx - (int)held.size());
  inactive_[a] = (float)(held.size() - keys_.size());
  kv_bytes_[a] = (float)held.size() * (float)shape_.kv_bytes_per_entry();
  paged_freed_[a] = (float)paged_bytes_freed(held, q_pos, block_size_, shape_.kv_bytes_per_entry());
}

void RunMetrics::record_scored_set(int step, int layer, int kv_head, std::span<const int32_t> set) {
  std::vector<int32_t>& prev = prev_set_[(size_t)layer * shape_.n_kv_heads + kv_head];
  if (step >= 0 && turnover_) turnover_v_[at(step, layer, kv_head)] = jaccard_distance(prev, set);
  prev.assign(set.begin(), set.end());
}

std::vector<NamedArray> RunMetrics::take() {
  const std::vector<uint64_t> dims = {(uint64_t)n_steps_, (uint64_t)shape_.n_layers, (uint64_t)shape_.n_kv_heads};
  std::vector<NamedArray> out;
  auto add = [&](const char* name, std::vector<float>& v) { out.push_back({name, dims, std::move(v)}); };
  add("recall", recall_);
  add("topk_miss", topk_miss_);
  add("kept", kept_);
  add("evicted", evicted_);
  add("inactive", inactive_);
  add("kv_bytes", kv_bytes_);
  add("paged_bytes_freed", paged_freed_);
  if (turnover_) add("hh_turnover", turnover_v_);
  return out;
}

}  // namespace kvs
