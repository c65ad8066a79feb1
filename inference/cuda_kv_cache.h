// The KV cache of the CUDA backend: K/V on the device as T (__half, __nv_bfloat16 or float),
// [n_layers, n_kv_heads, rows, head_dim] each, and a host mirror of what every (layer, KV head)
// holds (positions, active flags, the device row of each entry: KvPositions), which is the
// KvSlots that controllers read and edit. Eviction moves no device row: it frees the evicted
// entries' rows in the mirror, and later appends write there (a policy that evicts one entry a
// step used to move every later row of the head, each step). The device rows grow geometrically
// as entries arrive, up to the model's context, so a long-context model holds only what its
// sequence uses. Each head's row list (its entries' rows in held order, which decode's attention
// reads keys through once rows are out of order) is kept on the device too, and a step sends what
// changed in it (RowListEdits) rather than the list.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "inference/cuda_device.h"
#include "inference/hooks.h"
#include "inference/kv_positions.h"
#include "inference/row_list_edits.h"

namespace kvs {

template <class T>
class CudaKvCache : public KvSlots {
 public:
  // max_len bounds every head's entries (the model's context); no rows are allocated yet. With
  // list_slots, the row lists carry each entry's slot (keys cached before RoPE are rotated by it).
  CudaKvCache(int n_layers, int n_kv_heads, int head_dim, int max_len, bool list_slots, cudaStream_t stream);

  void clear() {  // a new sequence; device rows are overwritten later
    positions_.clear();
    edits_.forget_all();
  }
  void truncate(int32_t end) {  // drops entries at positions >= end
    positions_.truncate(end);
    edits_.forget_all();
  }

  int n_layers() const override { return positions_.n_layers(); }
  int n_kv_heads() const override { return positions_.n_kv_heads(); }
  std::span<const int32_t> held(int layer, int kv_head) const override { return positions_.held(layer, kv_head); }
  std::span<uint8_t> active(int layer, int kv_head) override { return positions_.active(layer, kv_head); }
  // Frees the evicted entries' rows for later appends; no device row moves.
  void evict(int layer, int kv_head, std::span<const uint8_t> keep) override {
    positions_.compact(layer, kv_head, keep);  // (checks keep's size first, naming the cache)
    edits_.evicted(layer, kv_head, keep);
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
  bool same_entries(int layer, int a, int b) const { return positions_.same_entries(layer, a, b); }
  int rows() const { return rows_; }  // device rows per head now (<= max_len)
  long head_stride() const { return static_cast<long>(rows_) * head_dim_; }  // values per head
  T* keys(int layer) {  // [n_kv_heads, rows, head_dim]
    return k_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }
  T* values(int layer) {  // [n_kv_heads, rows, head_dim]
    return v_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * head_stride();
  }

  // Row lists on the device, [n_kv_heads, list_stride()] a layer, two copies of each (an edit reads
  // one and writes the other). A step stages each KV head's list into a payload on the host
  // (stage_held_rows, stage_other_rows), uploads it, then runs the layer's edits (apply_row_lists).

  // Stages the head's held entries' rows: the edit of its device copy, or the list whole
  // (RowListEdits::stage); returns the payload ints written at payload + offset.
  int stage_held_rows(int layer, int kv_head, int offset, ops::RowListEdit& edit, int32_t* payload) {
    return edits_.stage(layer, kv_head, rows(layer, kv_head), offset, edit, payload);
  }
  // Stages n rows of some of the head's entries that the caller wrote at payload + offset, followed
  // by their slots with list_slots (RowListEdits::stage_other).
  void stage_other_rows(int layer, int kv_head, int n, int offset, ops::RowListEdit& edit) {
    edits_.stage_other(layer, kv_head, n, offset, list_slots_, edit);
  }
  // Runs layer l's staged edits (edits [n_kv_heads] and payload, uploaded on the stream) and returns
  // its lists ([n_kv_heads, list_stride()], valid until the next growth); max_entries: the most
  // entries a staged list or its source has. Allocates the lists on first use (OutOfMemory).
  const int32_t* apply_row_lists(int layer, const ops::RowListEdit* edits, const int32_t* payload, int max_entries);
  // Layer l's list slots [n_kv_heads, list_stride()] as the last apply_row_lists left them (with
  // list_slots; else null).
  const int32_t* list_slots(int layer) const { return slots_of(layer); }
  long list_stride() const { return rows_; }

  std::size_t bytes() const { return positions_.held_entries() * entry_bytes(); }
  std::size_t peak_bytes() const { return positions_.peak_entries() * entry_bytes(); }

 private:
  std::size_t entry_bytes() const { return 2 * static_cast<std::size_t>(head_dim_) * sizeof(T); }
  void grow(int needed);  // device rows for at least `needed` rows per head

  int32_t* slots_of(int layer) const {  // [n_kv_heads, rows] or null
    return slots_.get() ? slots_.get() + static_cast<std::size_t>(layer) * n_kv_heads() * list_stride() : nullptr;
  }
  int32_t* list_copy(int layer, int copy) {  // [n_kv_heads, rows]
    return lists_.get() + (static_cast<std::size_t>(copy) * n_layers() + layer) * n_kv_heads() * list_stride();
  }

  KvPositions positions_;
  RowListEdits edits_;
  int head_dim_;
  bool list_slots_;
  cudaStream_t stream_;
  int rows_ = 0;                           // device rows per head
  cuda::DeviceBuffer<T> k_, v_;            // [n_layers, n_kv_heads, rows, head_dim]
  cuda::DeviceBuffer<int32_t> lists_;      // [2, n_layers, n_kv_heads, rows] once a layer first uses one
  cuda::DeviceBuffer<int32_t> slots_;      // [n_layers, n_kv_heads, rows] likewise, with list_slots
  std::vector<uint8_t> current_;           // [n_layers] the copy of lists_ that holds the layer's lists
};

}  // namespace kvs
