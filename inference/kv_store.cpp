// Per-(layer, KV head) K/V rows beside their KvPositions, compacted in place on eviction.
#include "inference/kv_store.h"

#include <algorithm>
#include <cstring>

namespace kvs {

KvStore::KvStore(int n_layers, int n_kv_heads, int head_dim, int max_len)
    : positions_(n_layers, n_kv_heads, max_len, "KvStore"), head_dim_(head_dim),
      rows_(static_cast<std::size_t>(n_layers) * n_kv_heads) {}

void KvStore::append(int layer, int kv_head, int32_t pos0, int n, const float* keys,
                     const float* values, long stride) {
  const std::size_t first = positions_.size(layer, kv_head);
  positions_.push(layer, kv_head, pos0, n);  // checks capacity and order first
  Rows& r = rows(layer, kv_head);
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  const std::size_t capacity = r.k.size() / hd;
  if (first + n > capacity) {
    const std::size_t grown = std::min<std::size_t>(
        positions_.capacity(), std::max<std::size_t>(first + n, std::max<std::size_t>(16, 2 * capacity)));
    r.k.resize(grown * hd);
    r.v.resize(grown * hd);
  }
  for (int t = 0; t < n; ++t) {
    std::memcpy(r.k.data() + (first + t) * hd, keys + t * stride, hd * sizeof(float));
    std::memcpy(r.v.data() + (first + t) * hd, values + t * stride, hd * sizeof(float));
  }
}

void KvStore::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  const std::span<const int32_t> kept = positions_.compact(layer, kv_head, keep);
  Rows& r = rows(layer, kv_head);
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const std::size_t from = static_cast<std::size_t>(kept[i]);
    if (from == i) continue;
    std::memmove(r.k.data() + i * hd, r.k.data() + from * hd, hd * sizeof(float));
    std::memmove(r.v.data() + i * hd, r.v.data() + from * hd, hd * sizeof(float));
  }
}

}  // namespace kvs
