// CudaKvCache: device rows that grow as entries arrive; which row holds which entry is its
// KvPositions'.
#include "inference/cuda_kv_cache.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <utility>

namespace kvs {

template <class T>
CudaKvCache<T>::CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, cudaStream_t stream)
    : positions_(n_layers, n_kv_heads, max_len, "CudaKvCache"), head_dim_(head_dim), stream_(stream) {}

template <class T>
void CudaKvCache<T>::push(int layer, int kv_head, int32_t pos0, int n) {
  const int needed = positions_.rows_used_after(layer, kv_head, n);
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
  if (rows_ > 0) {  // every head's old rows to the start of its new rows
    for (auto [dst, src] : {std::pair{k.get(), k_.get()}, std::pair{v.get(), v_.get()}})
      cuda::check(cudaMemcpy2DAsync(dst, rows * row_bytes, src, rows_ * row_bytes, rows_ * row_bytes, heads,
                                    cudaMemcpyDeviceToDevice, stream_),
                  "KV cache growth");
    cuda::check(cudaStreamSynchronize(stream_), "KV cache growth");  // before the old rows are freed
  }
  k_ = std::move(k);
  v_ = std::move(v);
  rows_ = rows;
}

template class CudaKvCache<__half>;
template class CudaKvCache<__nv_bfloat16>;

}  // namespace kvs
