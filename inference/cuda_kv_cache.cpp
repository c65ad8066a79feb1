// CudaKvCache: host mirror bookkeeping and device compaction on eviction.
#include "inference/cuda_kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_ops.h"

namespace kvs {

CudaKvCache::CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int capacity, cudaStream_t stream)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), capacity_(capacity),
      stream_(stream), heads_(static_cast<std::size_t>(n_layers) * n_kv_heads),
      k_(static_cast<std::size_t>(n_layers) * n_kv_heads * capacity * head_dim, "the K cache"),
      v_(static_cast<std::size_t>(n_layers) * n_kv_heads * capacity * head_dim, "the V cache"),
      scratch_(static_cast<std::size_t>(capacity) * head_dim, "KV compaction"),
      keep_rows_(static_cast<std::size_t>(capacity), "KV compaction rows") {}

void CudaKvCache::clear() {
  for (Head& h : heads_) {
    h.pos.clear();
    h.active.clear();
  }
  held_entries_ = 0;
  peak_entries_ = 0;
}

void CudaKvCache::push(int layer, int kv_head, int32_t pos0, int n) {
  Head& h = head(layer, kv_head);
  if (h.pos.size() + n > static_cast<std::size_t>(capacity_)) {
    throw std::logic_error("CudaKvCache: layer " + std::to_string(layer) + " head " +
                           std::to_string(kv_head) + " would hold more than " +
                           std::to_string(capacity_) + " entries");
  }
  if (!h.pos.empty() && pos0 <= h.pos.back()) {
    throw std::logic_error("CudaKvCache: appended position " + std::to_string(pos0) +
                           " is not after the last held position");
  }
  for (int t = 0; t < n; ++t) {
    h.pos.push_back(pos0 + t);
    h.active.push_back(1);
  }
  held_entries_ += n;
  peak_entries_ = std::max(peak_entries_, held_entries_);
}

void CudaKvCache::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  Head& h = head(layer, kv_head);
  const int n = static_cast<int>(h.pos.size());
  if (keep.size() != static_cast<std::size_t>(n)) {
    throw std::logic_error("CudaKvCache::evict: keep has " + std::to_string(keep.size()) +
                           " flags for " + std::to_string(n) + " held entries");
  }
  std::vector<int32_t> rows;  // [n_keep] kept rows, ascending
  rows.reserve(n);
  for (int i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    h.pos[rows.size()] = h.pos[i];
    h.active[rows.size()] = h.active[i];
    rows.push_back(i);
  }
  const int n_keep = static_cast<int>(rows.size());
  held_entries_ -= static_cast<std::size_t>(n - n_keep);
  h.pos.resize(n_keep);
  h.active.resize(n_keep);
  if (n_keep == n || n_keep == 0) return;
  // Pageable upload: returns once `rows` is staged, so the vector may go out of scope.
  cuda::check(cudaMemcpyAsync(keep_rows_.get(), rows.data(), rows.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream_),
              "upload of the kept cache rows");
  const std::size_t row_bytes = static_cast<std::size_t>(head_dim_) * sizeof(__half);
  for (__half* base : {keys(layer), values(layer)}) {
    __half* head_rows = base + kv_head * head_stride();  // [capacity, head_dim]
    cuda::gather_rows(scratch_.get(), head_rows, keep_rows_.get(), n_keep, head_dim_, stream_);
    cuda::check(cudaMemcpyAsync(head_rows, scratch_.get(), n_keep * row_bytes, cudaMemcpyDeviceToDevice, stream_),
                "KV cache compaction");
  }
  cuda::check_launch("KV cache compaction");
}

}  // namespace kvs
