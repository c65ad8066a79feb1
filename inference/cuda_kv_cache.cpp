// CudaKvCache: device compaction on eviction, as its KvPositions says.
#include "inference/cuda_kv_cache.h"

#include "kernels/cuda_ops.h"

namespace kvs {

CudaKvCache::CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int capacity, cudaStream_t stream)
    : positions_(n_layers, n_kv_heads, capacity, "CudaKvCache"), head_dim_(head_dim), stream_(stream),
      k_(static_cast<std::size_t>(n_layers) * n_kv_heads * capacity * head_dim, "the K cache"),
      v_(static_cast<std::size_t>(n_layers) * n_kv_heads * capacity * head_dim, "the V cache"),
      scratch_(static_cast<std::size_t>(capacity) * head_dim, "KV compaction"),
      keep_rows_(static_cast<std::size_t>(capacity), "KV compaction rows") {}

void CudaKvCache::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  const int n = positions_.size(layer, kv_head);
  const std::span<const int32_t> rows = positions_.compact(layer, kv_head, keep);  // kept rows, ascending
  const int n_keep = static_cast<int>(rows.size());
  if (n_keep == n || n_keep == 0) return;
  // Pageable upload: returns once `rows` is staged, so the next compact() may reuse it.
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
