// KvPositions: the positions side of a KV cache, shared by KvStore and CudaKvCache.
#include "inference/kv_positions.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kvs {

KvPositions::KvPositions(int n_layers, int n_kv_heads, int capacity, std::string owner)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), capacity_(capacity), owner_(std::move(owner)),
      heads_(static_cast<std::size_t>(n_layers) * n_kv_heads) {}

void KvPositions::clear() {
  for (Head& h : heads_) {
    h.pos.clear();
    h.active.clear();
  }
  held_entries_ = 0;
  peak_entries_ = 0;
}

void KvPositions::truncate(int32_t end) {
  for (Head& h : heads_) {
    const std::size_t keep = std::lower_bound(h.pos.begin(), h.pos.end(), end) - h.pos.begin();
    held_entries_ -= h.pos.size() - keep;
    h.pos.resize(keep);
    h.active.resize(keep);
  }
}

void KvPositions::push(int layer, int kv_head, int32_t pos0, int n) {
  Head& h = head(layer, kv_head);
  if (h.pos.size() + n > static_cast<std::size_t>(capacity_)) {
    throw std::logic_error(owner_ + ": layer " + std::to_string(layer) + " head " + std::to_string(kv_head) +
                           " would hold more than " + std::to_string(capacity_) + " entries");
  }
  if (!h.pos.empty() && pos0 <= h.pos.back()) {
    throw std::logic_error(owner_ + ": appended position " + std::to_string(pos0) +
                           " is not after the last held position");
  }
  for (int t = 0; t < n; ++t) {
    h.pos.push_back(pos0 + t);
    h.active.push_back(1);
  }
  held_entries_ += n;
  peak_entries_ = std::max(peak_entries_, held_entries_);
}

std::span<const int32_t> KvPositions::compact(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  const std::size_t n = h.pos.size();
  if (keep.size() != n) {
    throw std::logic_error(owner_ + "::evict: keep has " + std::to_string(keep.size()) + " flags for " +
                           std::to_string(n) + " held entries");
  }
  kept_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    h.pos[kept_.size()] = h.pos[i];
    h.active[kept_.size()] = h.active[i];
    kept_.push_back(static_cast<int32_t>(i));
  }
  held_entries_ -= n - kept_.size();
  h.pos.resize(kept_.size());
  h.active.resize(kept_.size());
  return kept_;
}

}  // namespace kvs
