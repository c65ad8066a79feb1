// CudaKvCache: device rows that grow as entries arrive, compacted on eviction as its KvPositions
// says.
#include "inference/cuda_kv_cache.h"

#include <algorithm>
#include <utility>

#include "kernels/cuda_ops.h"

namespace kvs {

template <class T>
CudaKvCache<T>::CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, cudaStream_t stream)
    : positions_(n_layers, n_kv_heads, max_len, "CudaKvCache"), head_dim_(head_dim), stream_(stream) {}

template <class T>
void CudaKvCache<T>::push(int layer, int kv_head, int32_t pos0, int n) {
  const int needed = positions_.size(layer, kv_head) + n;
  if (needed > rows_ && needed <= positions_.capacity()) grow(needed);
  positions_.push(layer, kv_head, pos0, n);  // checks max_len and order
}

template <class T>
void CudaKvCache<T>::grow(int needed) {
  const int rows = std::min(positions_.capacity(), std::max({needed, 2 * rows_, 256}));
  const std::size_t heads = static_cast<std::size_t>(n_layers()) * n_kv_heads();
  const std::size_t row_bytes = static_cast<std::size_t>(head_dim_) * sizeof(T);
  cuda::DeviceBuffer<T> k(heads * rows * head_dim_, "the K cache");  // [n_layers, n_kv_heads, rows, head_dim]
  cuda::DeviceBuffer<T> v(heads * rows * head_dim_, "the V cache");
  cuda::DeviceBuffer<T> scratch(static_cast<std::size_t>(rows) * head_dim_, "KV compaction");
  cuda::DeviceBuffer<int32_t> keep_rows(static_cast<std::size_t>(rows), "KV compaction rows");
  if (rows_ > 0) {  // every head's old rows to the start of its new rows
    for (auto [dst, src] : {std::pair{k.get(), k_.get()}, std::pair{v.get(), v_.get()}})
      cuda::check(cudaMemcpy2DAsync(dst, rows * row_bytes, src, rows_ * row_bytes, rows_ * row_bytes, heads,
                                    cudaMemcpyDeviceToDevice, stream_),
                  "KV cache growth");
    cuda::check(cudaStreamSynchronize(stream_), "KV cache growth");  // before the old rows are freed
  }
  k_ = std::move(k);
  v_ = std::move(v);
  scratch_ = std::move(scratch);
  keep_rows_ = std::move(keep_rows);
  rows_ = rows;
}

template <class T>
void CudaKvCache<T>::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  const int n = positions_.size(layer, kv_head);
  const std::span<const int32_t> rows = positions_.compact(layer, kv_head, keep);  // kept rows, ascending
  const int n_keep = static_cast<int>(rows.size());
  if (n_keep == n || n_keep == 0) return;
  // Pageable upload: returns once `rows` is staged, so the next compact() may reuse it.
  cuda::check(cudaMemcpyAsync(keep_rows_.get(), rows.data(), rows.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream_),
              "upload of the kept cache rows");
  const std::size_t row_bytes = static_cast<std::size_t>(head_dim_) * sizeof(T);
  for (T* base : {keys(layer), values(layer)}) {
    T* head_rows = base + kv_head * head_stride();  // [rows, head_dim]
    cuda::gather_rows(scratch_.get(), head_rows, keep_rows_.get(), n_keep, head_dim_, stream_);
    cuda::check(cudaMemcpyAsync(head_rows, scratch_.get(), n_keep * row_bytes, cudaMemcpyDeviceToDevice, stream_),
                "KV cache compaction");
  }
  cuda::check_launch("KV cache compaction");
}

template class CudaKvCache<__half>;
template class CudaKvCache<__nv_bfloat16>;

}  // namespace kvs
