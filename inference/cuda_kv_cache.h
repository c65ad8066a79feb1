// The KV cache of the CUDA backend: K/V on the device as T (__half or __nv_bfloat16),
// [n_layers, n_kv_heads, rows, head_dim] each, and a host mirror of what every (layer, KV head)
// holds (positions, active flags, the device row of each entry: KvPositions), which is the
// KvSlots that controllers read and edit. Eviction moves no device row: it frees the evicted
// entries' rows in the mirror, and later appends write there (a policy that evicts one entry a
// step used to move every later row of the head, each step). The device rows grow geometrically
// as entries arrive, up to the model's context, so a long-context model holds only what its
// sequence uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "inference/cuda_device.h"
#include "inference/hooks.h"
#include "inference/kv_positions.h"

namespace kvs {

template <class T>
class CudaKvCache : public KvSlots {
 public:
  // max_len bounds every head's entries (the model's context); no rows are allocated yet.
  CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, cudaStream_t stream);

  void clear() { positions_.clear(); }  // a new sequence; device rows are overwritten later
  void truncate(int32_t end) { positions_.truncate(end); }  // drops entries at positions >= end

  int n_layers() const override { return positions_.n_layers(); }
  int n_kv_heads() const override { return positions_.n_kv_heads(); }
  std::span<const int32_t> held(int layer, int kv_head) const override { return positions_.held(layer, kv_head); }
  std::span<uint8_t> active(int layer, int kv_head) override { return positions_.active(layer, kv_head); }
  // Frees the evicted entries' rows for later appends; no device row moves.
  void evict(int layer, int kv_head, std::span<const uint8_t> keep) override {
    positions_.compact(layer, kv_head, keep);
  }

  // Records n new entries at positions pos0..pos0+n-1 (active), in the device rows rows() then
  // lists last (freed rows first, then fresh ones), growing the device rows when needed
  // (keys()/values()/head_stride() change then); the caller writes their K/V there (kv_append,
  // rope_append). Throws past max_len, and cuda::OutOfMemory (an InputError) when the larger rows
  // do not fit.
  void push(int layer, int kv_head, int32_t pos0, int n);

  int size(int layer, int kv_head) const { return positions_.size(layer, kv_head); }
  // The device row of each held entry ([size], in the order of held()).
  std::span<const int32_t> rows(int layer, int kv_head) const { return positions_.rows(layer, kv_head); }
  // Whether entry i sits in device row i for every held entry (nothing evicted out of order).
  bool rows_in_order(int layer, int kv_head) const { return positions_.rows_in_order(layer, kv_head); }
  int rows() const { return rows_; }  // device rows per head now (<= max_len)
  long head_stride() const { return static_cast<long>(rows_) * head_dim_; }  // values per head
  T* keys(int layer) {  // [n_kv_heads, rows, head_dim]
    return k_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }
  T* values(int layer) {  // [n_kv_heads, rows, head_dim]
    return v_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }

  std::size_t bytes() const { return positions_.held_entries() * entry_bytes(); }
  std::size_t peak_bytes() const { return positions_.peak_entries() * entry_bytes(); }

 private:
  std::size_t entry_bytes() const { return 2 * static_cast<std::size_t>(head_dim_) * sizeof(T); }
  void grow(int needed);  // device rows for at least `needed` rows per head

  KvPositions positions_;
  int head_dim_;
  cudaStream_t stream_;
  int rows_ = 0;                           // device rows per head
  cuda::DeviceBuffer<T> k_, v_;            // [n_layers, n_kv_heads, rows, head_dim]
};

}  // namespace kvs
