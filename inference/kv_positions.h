// What a per-(layer, KV head) KV cache holds, as positions: each head's held entries in ascending
// position order with their active flags and the storage row each one's K/V sits in, capacity and
// ascending checks, and the held/peak entry counts. Eviction frees an entry's row for the next
// append instead of moving every later row down: a controller that evicts one entry a step would
// otherwise move the whole cache every step. The CPU KvStore and the GPU CudaKvCache keep their
// K/V rows beside it and read them through rows().
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvs {

class KvPositions {
 public:
  // `owner` names the cache in error messages; capacity bounds every head's entries (and so its
  // storage rows).
  KvPositions(int n_layers, int n_kv_heads, int capacity, std::string owner);

  void clear();  // drops every entry, row and the peak
  // Drops every head's entries at positions >= end (the tail of its ascending positions) and
  // frees their rows (the next append takes the first dropped entry's row); the entries before
  // keep their flags and rows, the peak stays.
  void truncate(int32_t end);
  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int capacity() const { return capacity_; }
  int size(int layer, int kv_head) const { return static_cast<int>(head(layer, kv_head).pos.size()); }
  std::span<const int32_t> held(int layer, int kv_head) const { return head(layer, kv_head).pos; }
  std::span<uint8_t> active(int layer, int kv_head) { return head(layer, kv_head).active; }
  // The storage row of each held entry ([size], all different, each < rows_used()).
  std::span<const int32_t> rows(int layer, int kv_head) const { return head(layer, kv_head).row; }
  // Whether entry i sits in row i for every held entry (nothing evicted out of order yet).
  bool rows_in_order(int layer, int kv_head) const { return head(layer, kv_head).in_order; }
  // Storage rows the head has used so far: every row an entry sits in is below it.
  int rows_used(int layer, int kv_head) const { return head(layer, kv_head).used; }
  // rows_used() once n more entries were pushed (free rows are taken first).
  int rows_used_after(int layer, int kv_head, int n) const;

  // Records n new active entries at positions pos0..pos0+n-1 after the head's last entry, in free
  // rows (the most recently freed first), then in fresh ones. Throws std::logic_error past
  // capacity or when pos0 is not after the last held position.
  void push(int layer, int kv_head, int32_t pos0, int n);
  // Removes the entries whose keep[i] == 0 (keep has size() flags); their rows become free.
  void compact(int layer, int kv_head, std::span<const uint8_t> keep);

  std::size_t held_entries() const { return held_entries_; }
  std::size_t peak_entries() const { return peak_entries_; }

 private:
  struct Head {
    std::vector<int32_t> pos;     // [n] ascending
    std::vector<uint8_t> active;  // [n]
    std::vector<int32_t> row;     // [n] storage row of each entry
    std::vector<int32_t> free;    // [used - n] rows no entry sits in; the back is taken first
    int used = 0;                 // rows ever taken: 0..used-1
    bool in_order = true;         // row[i] == i for every i
  };
  Head& head(int layer, int kv_head) { return heads_[static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head]; }
  const Head& head(int layer, int kv_head) const { return heads_[static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head]; }

  int n_layers_, n_kv_heads_, capacity_;
  std::string owner_;
  std::vector<Head> heads_;     // [n_layers * n_kv_heads]
  std::size_t held_entries_ = 0;
  std::size_t peak_entries_ = 0;
};

}  // namespace kvs
