// CudaKvCache: device rows that grow as entries arrive; which row holds which entry is its
// KvPositions'.
#include "inference/cuda_kv_cache.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <utility>

#include "kernels/cuda_ops.h"

namespace kvs {

template <class T>
CudaKvCache<T>::CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, bool list_slots,
                            cudaStream_t stream)
    : positions_(n_layers, n_kv_heads, max_len, "CudaKvCache"), edits_(n_layers, n_kv_heads), head_dim_(head_dim),
      list_slots_(list_slots), stream_(stream), current_(n_layers, 0) {}

template <class T>
void CudaKvCache<T>::push(int layer, int kv_head, int32_t pos0, int n) {
  const int needed = positions_.rows_used_after(layer, kv_head, n);
  if (needed > rows_ && needed <= positions_.capacity()) grow(needed);
  positions_.push(layer, kv_head, pos0, n);  // checks max_len and order
  const std::span<const int32_t> held_rows = rows(layer, kv_head);
  edits_.appended(layer, kv_head, held_rows.subspan(held_rows.size() - n));
}

template <class T>
const int32_t* CudaKvCache<T>::apply_row_lists(int layer, const ops::RowListEdit* edits, const int32_t* payload,
                                               int max_entries) {
  const std::size_t lists = static_cast<std::size_t>(n_layers()) * n_kv_heads() * list_stride();
  if (!lists_.get()) {
    lists_ = cuda::DeviceBuffer<int32_t>(2 * lists, "the KV cache's row lists");
    if (list_slots_) slots_ = cuda::DeviceBuffer<int32_t>(lists, "the KV cache's row lists");
  }
  const int from = current_[layer], to = 1 - from;
  cuda::edit_row_lists(list_copy(layer, to), slots_of(layer), list_copy(layer, from), list_stride(), edits, payload,
                       n_kv_heads(), max_entries, stream_);
  current_[layer] = static_cast<uint8_t>(to);
  return list_copy(layer, to);
}

template <class T>
void CudaKvCache<T>::grow(int needed) {
  const int rows = std::min(positions_.capacity(), std::max({needed, 2 * rows_, 256}));
  const std::size_t heads = static_cast<std::size_t>(n_layers()) * n_kv_heads();
  const std::size_t row_bytes = static_cast<std::size_t>(head_dim_) * sizeof(T);
  cuda::DeviceBuffer<T> k(heads * rows * head_dim_, "the K cache");  // [n_layers, n_kv_heads, rows, head_dim]
  cuda::DeviceBuffer<T> v(heads * rows * head_dim_, "the V cache");
  // The row lists keep their edits' state: lists staged this step, not yet applied, edit them.
  cuda::DeviceBuffer<int32_t> lists, slots;  // [2, n_layers, n_kv_heads, rows], [n_layers, n_kv_heads, rows]
  if (lists_.get()) lists = cuda::DeviceBuffer<int32_t>(2 * heads * rows, "the KV cache's row lists");
  if (slots_.get()) slots = cuda::DeviceBuffer<int32_t>(heads * rows, "the KV cache's row lists");
  if (rows_ > 0) {  // every head's old rows (and lists) to the start of its new ones
    // n blocks of rows_ old rows, row_size bytes each, to blocks of `rows` new rows.
    auto carry = [&](void* dst, const void* src, std::size_t row_size, std::size_t n) {
      if (!dst) return;
      cuda::check(cudaMemcpy2DAsync(dst, rows * row_size, src, rows_ * row_size, rows_ * row_size, n,
                                    cudaMemcpyDeviceToDevice, stream_),
                  "KV cache growth");
    };
    carry(k.get(), k_.get(), row_bytes, heads);
    carry(v.get(), v_.get(), row_bytes, heads);
    carry(lists.get(), lists_.get(), sizeof(int32_t), 2 * heads);
    carry(slots.get(), slots_.get(), sizeof(int32_t), heads);
    cuda::check(cudaStreamSynchronize(stream_), "KV cache growth");  // before the old rows are freed
  }
  k_ = std::move(k);
  v_ = std::move(v);
  lists_ = std::move(lists);
  slots_ = std::move(slots);
  rows_ = rows;
}

template class CudaKvCache<__half>;
template class CudaKvCache<__nv_bfloat16>;
template class CudaKvCache<float>;

}  // namespace kvs
