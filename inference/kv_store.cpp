// Per-(layer, KV head) K/V storage with in-place compaction on eviction.
#include "inference/kv_store.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace kvs {

KvStore::KvStore(int n_layers, int n_kv_heads, int head_dim, int max_len)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), max_len_(max_len),
      heads_(static_cast<std::size_t>(n_layers) * n_kv_heads) {}

void KvStore::clear() {
  for (Head& h : heads_) {
    h.n = 0;
    h.pos.clear();
    h.active.clear();
  }
  held_entries_ = 0;
  peak_entries_ = 0;
}

std::span<const int32_t> KvStore::held(int layer, int kv_head) const {
  const Head& h = head(layer, kv_head);
  return {h.pos.data(), h.pos.size()};
}

std::span<uint8_t> KvStore::active(int layer, int kv_head) {
  Head& h = head(layer, kv_head);
  return {h.active.data(), h.active.size()};
}

void KvStore::append(int layer, int kv_head, int32_t pos0, int n, const float* keys,
                     const float* values, long stride) {
  Head& h = head(layer, kv_head);
  if (h.n + n > max_len_) {
    throw std::logic_error("KvStore: layer " + std::to_string(layer) + " head " +
                           std::to_string(kv_head) + " would hold more than " +
                           std::to_string(max_len_) + " entries");
  }
  if (!h.pos.empty() && pos0 <= h.pos.back()) {
    throw std::logic_error("KvStore: appended position " + std::to_string(pos0) +
                           " is not after the last held position");
  }
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  const std::size_t capacity = h.k.size() / hd;
  if (static_cast<std::size_t>(h.n + n) > capacity) {
    const std::size_t grown = std::min<std::size_t>(
        max_len_, std::max<std::size_t>(h.n + n, std::max<std::size_t>(16, 2 * capacity)));
    h.k.resize(grown * hd);
    h.v.resize(grown * hd);
  }
  for (int t = 0; t < n; ++t) {
    std::memcpy(h.k.data() + (h.n + t) * hd, keys + t * stride, hd * sizeof(float));
    std::memcpy(h.v.data() + (h.n + t) * hd, values + t * stride, hd * sizeof(float));
    h.pos.push_back(pos0 + t);
    h.active.push_back(1);
  }
  h.n += n;
  held_entries_ += n;
  peak_entries_ = std::max(peak_entries_, held_entries_);
}

void KvStore::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  if (keep.size() != static_cast<std::size_t>(h.n)) {
    throw std::logic_error("KvStore::evict: keep has " + std::to_string(keep.size()) +
                           " flags for " + std::to_string(h.n) + " held entries");
  }
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  int out = 0;
  for (int i = 0; i < h.n; ++i) {
    if (!keep[i]) continue;
    if (out != i) {
      std::memmove(h.k.data() + out * hd, h.k.data() + i * hd, hd * sizeof(float));
      std::memmove(h.v.data() + out * hd, h.v.data() + i * hd, hd * sizeof(float));
      h.pos[out] = h.pos[i];
      h.active[out] = h.active[i];
    }
    ++out;
  }
  held_entries_ -= static_cast<std::size_t>(h.n - out);
  h.n = out;
  h.pos.resize(out);
  h.active.resize(out);
}

}  // namespace kvs
