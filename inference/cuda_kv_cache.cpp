// CudaKvCache: device rows that grow as entries arrive, compacted after evictions as its
// KvPositions says.
#include "inference/cuda_kv_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
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

template <class T>
void CudaKvCache<T>::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  const int n = positions_.size(layer, kv_head);
  const std::span<const int32_t> kept = positions_.compact(layer, kv_head, keep);  // kept rows, ascending
  if (static_cast<int>(kept.size()) == n) return;
  const auto key = std::pair{layer, kv_head};
  auto it = moves_.find(key);
  if (it == moves_.end()) {
    moves_.emplace(key, std::vector<int32_t>(kept.begin(), kept.end()));
  } else {  // host row i was host row kept[i], which is at device row before[kept[i]]
    std::vector<int32_t>& before = it->second;
    std::vector<int32_t> now(kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) now[i] = before[kept[i]];
    before = std::move(now);
  }
}

template <class T>
void CudaKvCache<T>::flush() {
  if (moves_.empty()) return;
  // Rows whose place changes, by absolute row over every head (the kernels index rows by int32):
  // old places (from), then new ones (to).
  if (static_cast<long>(n_layers()) * n_kv_heads() * rows_ > std::numeric_limits<int32_t>::max()) {
    throw std::length_error("CudaKvCache: more cache rows than a 32-bit row index reaches");
  }
  std::vector<int32_t> from, to;
  for (const auto& [key, rows] : moves_) {
    const int32_t base = static_cast<int32_t>((key.first * n_kv_heads() + key.second) * static_cast<long>(rows_));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] == static_cast<int32_t>(i)) continue;  // the rows before the first gap stay
      from.push_back(base + rows[i]);
      to.push_back(base + static_cast<int32_t>(i));
    }
  }
  moves_.clear();
  const int n = static_cast<int>(from.size());
  if (n == 0) return;
  if (scratch_.size() < static_cast<std::size_t>(n) * head_dim_) {
    cuda::check(cudaStreamSynchronize(stream_), "KV cache compaction");  // the old buffers may be in use
    const std::size_t cap = std::max<std::size_t>(static_cast<std::size_t>(n), 2 * scratch_.size() / head_dim_);
    scratch_ = cuda::DeviceBuffer<T>(cap * head_dim_, "KV compaction");
    move_dev_ = cuda::DeviceBuffer<int32_t>(2 * cap, "KV compaction rows");
  }
  const std::size_t cap = scratch_.size() / head_dim_;
  // Pageable uploads: each returns once its host rows are staged, so they may go out of scope.
  cuda::check(cudaMemcpyAsync(move_dev_.get(), from.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
              "upload of the moved cache rows");
  cuda::check(cudaMemcpyAsync(move_dev_.get() + cap, to.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
              "upload of the moved cache rows");
  for (T* cache : {k_.get(), v_.get()}) {  // [n_layers * n_kv_heads * rows, head_dim]
    cuda::gather_rows(scratch_.get(), cache, move_dev_.get(), n, head_dim_, stream_);
    cuda::scatter_rows(cache, scratch_.get(), move_dev_.get() + cap, n, head_dim_, stream_);
  }
  cuda::check_launch("KV cache compaction");
}

template class CudaKvCache<__half>;
template class CudaKvCache<__nv_bfloat16>;

}  // namespace kvs
