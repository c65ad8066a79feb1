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
  for (Head& h : heads_) h = Head{};
  held_entries_ = 0;
  peak_entries_ = 0;
}

void KvPositions::truncate(int32_t end) {
  for (Head& h : heads_) {
    const std::size_t keep = std::lower_bound(h.pos.begin(), h.pos.end(), end) - h.pos.begin();
    held_entries_ -= h.pos.size() - keep;
    // Last dropped first onto the free stack, so that appends take them back in position order:
    // a rewound head whose rows were in order stays in order.
    for (std::size_t i = h.pos.size(); i > keep; --i) h.free.push_back(h.row[i - 1]);
    h.pos.resize(keep);
    h.active.resize(keep);
    h.row.resize(keep);
    h.in_order = true;  // the dropped tail may have held the only rows out of order
    for (std::size_t i = 0; i < keep && h.in_order; ++i) h.in_order = h.row[i] == static_cast<int32_t>(i);
  }
}

int KvPositions::rows_used_after(int layer, int kv_head, int n) const {
  const Head& h = head(layer, kv_head);
  return h.used + std::max(0, n - static_cast<int>(h.free.size()));
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
    int32_t r = h.used;
    if (h.free.empty()) {
      ++h.used;
    } else {
      r = h.free.back();
      h.free.pop_back();
    }
    h.in_order = h.in_order && r == static_cast<int32_t>(h.pos.size());
    h.pos.push_back(pos0 + t);
    h.active.push_back(1);
    h.row.push_back(r);
  }
  held_entries_ += n;
  peak_entries_ = std::max(peak_entries_, held_entries_);
}

void KvPositions::compact(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  const std::size_t n = h.pos.size();
  if (keep.size() != n) {
    throw std::logic_error(owner_ + "::evict: keep has " + std::to_string(keep.size()) + " flags for " +
                           std::to_string(n) + " held entries");
  }
  const std::size_t free0 = h.free.size();
  std::size_t kept = 0;
  bool in_order = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (!keep[i]) {
      h.free.push_back(h.row[i]);
      continue;
    }
    h.pos[kept] = h.pos[i];
    h.active[kept] = h.active[i];
    h.row[kept] = h.row[i];
    in_order = in_order && h.row[kept] == static_cast<int32_t>(kept);
    ++kept;
  }
  // The freed rows in descending order on the stack: appends take the lowest first.
  std::reverse(h.free.begin() + static_cast<std::ptrdiff_t>(free0), h.free.end());
  held_entries_ -= n - kept;
  h.pos.resize(kept);
  h.active.resize(kept);
  h.row.resize(kept);
  h.in_order = in_order;
}

}  // namespace kvs
