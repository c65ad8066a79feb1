// The KV cache of the CUDA backend: K/V on the device as T (__half or __nv_bfloat16),
// [n_layers, n_kv_heads, rows, head_dim] each, and a host mirror of what every (layer, KV head) holds (positions, active
// flags), which is the KvSlots that controllers read and edit. Eviction compacts the host mirror
// at once, as KvStore::evict compacts its host rows, and the device rows when they are next asked
// for (keys()/values()): every head's moved rows gathered and scattered back in one pass. The
// device rows grow
// geometrically as entries arrive, up to the model's context, so a long-context model holds only
// what its sequence uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "inference/cuda_device.h"
#include "inference/hooks.h"
#include "inference/kv_positions.h"

namespace kvs {

template <class T>
class CudaKvCache : public KvSlots {
 public:
  // max_len bounds every head's entries (the model's context); no rows are allocated yet.
  CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, cudaStream_t stream);

  void clear() {  // a new sequence; device rows are overwritten later
    positions_.clear();
    moves_.clear();
  }
  void truncate(int32_t end) {  // drops entries at positions >= end
    flush();
    positions_.truncate(end);
  }

  int n_layers() const override { return positions_.n_layers(); }
  int n_kv_heads() const override { return positions_.n_kv_heads(); }
  std::span<const int32_t> held(int layer, int kv_head) const override { return positions_.held(layer, kv_head); }
  std::span<uint8_t> active(int layer, int kv_head) override { return positions_.active(layer, kv_head); }
  // The host mirror now; the device rows when keys() or values() next gives them out.
  void evict(int layer, int kv_head, std::span<const uint8_t> keep) override;

  // Records n new entries at positions pos0..pos0+n-1 (active) at the end of the head's rows,
  // growing the device rows when needed (keys()/values()/head_stride() change then); the caller
  // writes their K/V at rows size()..size()+n-1 (kv_append). Throws past max_len, and
  // cuda::OutOfMemory (an InputError) when the larger rows do not fit.
  void push(int layer, int kv_head, int32_t pos0, int n);

  int size(int layer, int kv_head) const { return positions_.size(layer, kv_head); }
  int rows() const { return rows_; }  // device rows per head now (<= max_len)
  long head_stride() const { return static_cast<long>(rows_) * head_dim_; }  // values per head
  // A layer's device rows, the evictions so far applied first (queued on the stream before
  // whatever the caller queues next).
  T* keys(int layer) {  // [n_kv_heads, rows, head_dim]
    flush();
    return k_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }
  T* values(int layer) {  // [n_kv_heads, rows, head_dim]
    flush();
    return v_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }

  std::size_t bytes() const { return positions_.held_entries() * entry_bytes(); }
  std::size_t peak_bytes() const { return positions_.peak_entries() * entry_bytes(); }

 private:
  std::size_t entry_bytes() const { return 2 * static_cast<std::size_t>(head_dim_) * sizeof(T); }
  void grow(int needed);  // device rows for at least `needed` entries per head
  // Moves the device rows as the evictions since the last flush say: one upload of the moved
  // rows' old and new places, one gather into scratch and one scatter back for keys and for
  // values, whatever the number of heads that evicted (a compaction a head cost an upload and
  // four launches: with a policy that evicts every step, 1,024 a step on an 8B model).
  void flush();

  KvPositions positions_;
  int head_dim_;
  cudaStream_t stream_;
  int rows_ = 0;                           // device rows per head
  cuda::DeviceBuffer<T> k_, v_;            // [n_layers, n_kv_heads, rows, head_dim]
  // Per (layer, KV head) with evictions not yet flushed: the device row each of its host rows
  // is now at (ascending; composed when a head evicts again before the flush).
  std::map<std::pair<int, int>, std::vector<int32_t>> moves_;
  cuda::DeviceBuffer<int32_t> move_dev_;   // [2, capacity] the same on the device
  cuda::DeviceBuffer<T> scratch_;          // [capacity, head_dim] moved rows in transit
};

}  // namespace kvs
