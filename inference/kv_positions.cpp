// KvPositions: the positions side of a KV cache, shared by KvStore and CudaKvCache.
#include "inference/kv_positions.h"

#include <algorithm>
#include <cstring>
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
    const std::span<const int32_t> held = h.held();
    const std::size_t keep = std::lower_bound(held.begin(), held.end(), end) - held.begin();
    held_entries_ -= held.size() - keep;
    // Last dropped first onto the free stack, so that appends take them back in position order:
    // a rewound head whose rows were in order stays in order.
    for (std::size_t i = held.size(); i > keep; --i) h.free.push_back(h.row[h.first + i - 1]);
    h.pos.resize(h.first + keep);
    h.active.resize(h.first + keep);
    h.row.resize(h.first + keep);
    h.in_order = true;  // the dropped tail may have held the only rows out of order
    for (std::size_t i = 0; i < keep && h.in_order; ++i) h.in_order = h.row[h.first + i] == static_cast<int32_t>(i);
  }
}

int KvPositions::rows_used_after(int layer, int kv_head, int n) const {
  const Head& h = head(layer, kv_head);
  return h.used + std::max(0, n - static_cast<int>(h.free.size()));
}

void KvPositions::push(int layer, int kv_head, int32_t pos0, int n) {
  Head& h = head(layer, kv_head);
  if (h.size() + n > static_cast<std::size_t>(capacity_)) {
    throw std::logic_error(owner_ + ": layer " + std::to_string(layer) + " head " + std::to_string(kv_head) +
                           " would hold more than " + std::to_string(capacity_) + " entries");
  }
  if (h.size() > 0 && pos0 <= h.pos.back()) {
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
    h.in_order = h.in_order && r == static_cast<int32_t>(h.size());
    h.pos.push_back(pos0 + t);
    h.active.push_back(1);
    h.row.push_back(r);
  }
  held_entries_ += n;
  peak_entries_ = std::max(peak_entries_, held_entries_);
}

void KvPositions::compact(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  const std::size_t n = h.size();
  if (keep.size() != n) {
    throw std::logic_error(owner_ + "::evict: keep has " + std::to_string(keep.size()) + " flags for " +
                           std::to_string(n) + " held entries");
  }
  if (n == 0) return;
  const uint8_t* k = keep.data();
  const auto* gap = static_cast<const uint8_t*>(std::memchr(k, 0, n));
  if (!gap) return;
  const std::size_t first_gap = static_cast<std::size_t>(gap - k);
  const std::size_t last_gap = static_cast<std::size_t>(static_cast<const uint8_t*>(memrchr(k, 0, n)) - k);
  const std::size_t evicted = static_cast<std::size_t>(std::count(k + first_gap, k + last_gap + 1, uint8_t{0}));
  int32_t* pos = h.pos.data() + h.first;  // [n]
  uint8_t* act = h.active.data() + h.first;  // [n]
  int32_t* row = h.row.data() + h.first;  // [n]
  auto move = [&](std::size_t to, std::size_t from, std::size_t count) {
    std::memmove(pos + to, pos + from, count * sizeof(int32_t));
    std::memmove(act + to, act + from, count);
    std::memmove(row + to, row + from, count * sizeof(int32_t));
  };
  // Freed rows go onto the stack in reverse entry order: appends take the first one freed first.
  const std::size_t kept_after = n - first_gap - evicted;  // kept entries past the first gap
  const std::size_t kept_before = last_gap + 1 - evicted;  // kept entries before the last gap
  if (kept_before < kept_after) {
    // Up: the entries before the last gap move toward it, run by run from the back; the held
    // entries then begin `evicted` later.
    std::size_t to = last_gap + 1;
    for (std::size_t i = last_gap + 1; i > 0;) {
      if (!k[i - 1]) {
        h.free.push_back(row[--i]);
        continue;
      }
      std::size_t j = i - 1;
      while (j > 0 && k[j - 1]) --j;  // kept run [j, i)
      to -= i - j;
      move(to, j, i - j);
      i = j;
    }
    h.first += evicted;
  } else {
    // Down: the entries past the first gap move toward it, run by run.
    const std::size_t free0 = h.free.size();
    std::size_t to = first_gap;
    for (std::size_t i = first_gap; i < n;) {
      if (!k[i]) {
        h.free.push_back(row[i++]);
        continue;
      }
      const auto* end = static_cast<const uint8_t*>(std::memchr(k + i, 0, n - i));
      const std::size_t run = (end ? static_cast<std::size_t>(end - k) : n) - i;
      move(to, i, run);
      to += run;
      i += run;
    }
    std::reverse(h.free.begin() + static_cast<std::ptrdiff_t>(free0), h.free.end());
    h.pos.resize(h.first + n - evicted);
    h.active.resize(h.first + n - evicted);
    h.row.resize(h.first + n - evicted);
  }
  held_entries_ -= evicted;
  if (h.first > h.size()) {  // the evicted front outnumbers the held entries: drop it
    h.pos.erase(h.pos.begin(), h.pos.begin() + static_cast<std::ptrdiff_t>(h.first));
    h.active.erase(h.active.begin(), h.active.begin() + static_cast<std::ptrdiff_t>(h.first));
    h.row.erase(h.row.begin(), h.row.begin() + static_cast<std::ptrdiff_t>(h.first));
    h.first = 0;
  }
  if (h.in_order) {
    h.in_order = first_gap + evicted == n;  // else a kept entry moved, away from its row
  } else if (h.size() > 0 && h.rows().back() == static_cast<int32_t>(h.size()) - 1) {
    // Rows out of order may come back into order (the entries out of place evicted); not while
    // the last entry sits elsewhere than its index, as it does after a reused row is taken.
    const std::span<const int32_t> rows = h.rows();
    std::size_t i = 0;
    while (i < rows.size() && rows[i] == static_cast<int32_t>(i)) ++i;
    h.in_order = i == rows.size();
  } else {
    h.in_order = h.size() == 0;
  }
}

bool KvPositions::same_entries(int layer, int a, int b) const {
  const Head& x = head(layer, a);
  const Head& y = head(layer, b);
  const auto same = [](auto u, auto v) { return u.size() == v.size() && std::equal(u.begin(), u.end(), v.begin()); };
  // The flags first: where heads differ they differ most often.
  return same(x.flags(), y.flags()) && same_positions(x.held(), y.held()) &&
         ((x.in_order && y.in_order) || same(x.rows(), y.rows()));
}

bool consecutive(std::span<const int32_t> positions) {
  // Ascending and distinct: a list whose last position is its first plus its length - 1 holds
  // every position in between.
  return positions.empty() ||
         static_cast<int64_t>(positions.back()) - positions.front() == static_cast<int64_t>(positions.size()) - 1;
}

bool same_positions(std::span<const int32_t> a, std::span<const int32_t> b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  if (consecutive(a) && consecutive(b)) return a.front() == b.front();
  return std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace kvs
