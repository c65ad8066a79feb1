// K/V cache held per (layer, KV head): each head owns K [rows, head_dim] and V [rows, head_dim],
// its positions (ascending), active flags and the row each entry sits in (KvPositions). Eviction
// moves no row: the evicted entries' rows take the next appends, so heads hold different numbers
// of entries without padding and a policy that evicts every step costs no copying. Every head's
// rows sit in one arena reserved for the whole context up front, so appending never moves them.
// Rows are fp32, or fp16/bf16 (half the bytes for decode to read), rounded to nearest even as
// they are appended and widened exactly as the attention kernels read them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "inference/engine.h"
#include "inference/hooks.h"
#include "inference/huge_pages.h"
#include "inference/kv_positions.h"
#include "kernels/attention.h"

namespace kvs {

// The element type of a KvDtype's cache rows.
inline ops::RowType kv_row_type(KvDtype d) {
  return d == KvDtype::Fp16 ? ops::RowType::F16 : d == KvDtype::Bf16 ? ops::RowType::BF16 : ops::RowType::F32;
}

class KvStore : public KvSlots {
 public:
  // max_len bounds every head's capacity (the model's context); rows hold elements of `type`.
  // Throws InputError ("KV cache: cannot reserve ...") when the address space for that context
  // cannot be had.
  KvStore(int n_layers, int n_kv_heads, int head_dim, int max_len, ops::RowType type = ops::RowType::F32);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Drops every entry and the peak (a new sequence). Capacity is kept for reuse.
  void clear() { positions_.clear(); }
  // Drops the entries at positions >= end (a rewind); their rows are overwritten by later appends.
  void truncate(int32_t end) { positions_.truncate(end); }

  int n_layers() const override { return positions_.n_layers(); }
  int n_kv_heads() const override { return positions_.n_kv_heads(); }
  std::span<const int32_t> held(int layer, int kv_head) const override { return positions_.held(layer, kv_head); }
  std::span<uint8_t> active(int layer, int kv_head) override { return positions_.active(layer, kv_head); }
  // Drops the entries whose keep[i] == 0; their rows are reused by later appends.
  void evict(int layer, int kv_head, std::span<const uint8_t> keep) override {
    positions_.compact(layer, kv_head, keep);
  }

  // Appends n entries at positions pos0..pos0+n-1 (active), in the rows KvPositions::push gives
  // them. Entry t's key/value starts at keys + t * stride (values + t * stride) and holds head_dim
  // floats, rounded to the store's type. Positions must stay ascending.
  void append(int layer, int kv_head, int32_t pos0, int n, const float* keys, const float* values,
              long stride);
  // As append, from entries already in the store's type, copied as they are: entry t's key
  // (value) is the head_dim elements from element t * head_dim of keys (values).
  void append_stored(int layer, int kv_head, int32_t pos0, int n, const void* keys, const void* values);

  int size(int layer, int kv_head) const { return positions_.size(layer, kv_head); }
  // The row of each held entry ([size]) in keys()/values().
  std::span<const int32_t> rows(int layer, int kv_head) const { return positions_.rows(layer, kv_head); }
  bool rows_in_order(int layer, int kv_head) const { return positions_.rows_in_order(layer, kv_head); }
  int rows_used(int layer, int kv_head) const { return positions_.rows_used(layer, kv_head); }
  ops::RowData keys(int layer, int kv_head) const { return {slab(layer, kv_head, 0), type_}; }    // [rows_used, head_dim]
  ops::RowData values(int layer, int kv_head) const { return {slab(layer, kv_head, 1), type_}; }  // [rows_used, head_dim]
  // out[head_dim] <- the key (value) in `row` of a head, as fp32.
  void read_key(int layer, int kv_head, int32_t row, float* out) const { read_row(slab(layer, kv_head, 0), row, out); }
  void read_value(int layer, int kv_head, int32_t row, float* out) const { read_row(slab(layer, kv_head, 1), row, out); }
  int head_dim() const { return head_dim_; }
  ops::RowType type() const { return type_; }

  std::size_t bytes() const { return positions_.held_entries() * entry_bytes(); }  // K+V bytes of held entries
  std::size_t peak_bytes() const { return positions_.peak_entries() * entry_bytes(); }
  // K+V bytes a store of this shape takes to hold `positions` entries in every (layer, KV head).
  static uint64_t bytes_for(int n_layers, int n_kv_heads, int head_dim, uint64_t positions,
                            ops::RowType type = ops::RowType::F32) {
    return positions * n_layers * n_kv_heads * 2 * static_cast<uint64_t>(head_dim) * element_bytes(type);
  }
  static std::size_t element_bytes(ops::RowType type) { return type == ops::RowType::F32 ? 4 : 2; }

 private:
  // Slab `which` (0 = K, 1 = V) of a head: [max_len, head_dim] elements.
  std::byte* slab(int layer, int kv_head, int which) const {
    return arena_ + ((static_cast<std::size_t>(layer) * n_kv_heads() + kv_head) * 2 + which) * slab_bytes_;
  }
  std::size_t entry_bytes() const { return bytes_for(1, 1, head_dim_, 1, type_); }
  void read_row(const std::byte* slab, int32_t row, float* out) const;
  // Pushes n entries at pos0.. and calls write(t, K slab, V slab, first element of entry t's row)
  // for each; huge pages for the rows filled.
  template <class WriteEntry>
  void append_rows(int layer, int kv_head, int32_t pos0, int n, WriteEntry write);
  // Huge pages for the 2 MiB ranges of a large arena's slab that rows first..last-1 filled past
  // their middle (see the constructor).
  void collapse_filled(std::byte* slab, std::size_t first, std::size_t last) const;

  KvPositions positions_;
  int head_dim_;
  ops::RowType type_;
  std::size_t slab_bytes_;   // bytes from one slab to the next: max_len rows, rounded up
  std::size_t arena_bytes_;
  bool collapse_;            // a large arena: huge pages slab range by slab range as rows fill them
  std::byte* arena_;         // [n_layers, n_kv_heads, 2 (K, V), slab_bytes_] reserved, committed on touch
};

}  // namespace kvs
