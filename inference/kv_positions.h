// What a per-(layer, KV head) KV cache holds, as positions: each head's held positions
// (ascending) and active flags, capacity and ascending checks, compaction on eviction, and the
// held/peak entry counts. The CPU KvStore and the GPU CudaKvCache keep their K/V rows beside it
// and move them as compact() says.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvs {

class KvPositions {
 public:
  // `owner` names the cache in error messages; capacity bounds every head's entries.
  KvPositions(int n_layers, int n_kv_heads, int capacity, std::string owner);

  void clear();  // drops every entry and the peak
  // Drops every head's entries at positions >= end (the tail of its ascending positions); the
  // entries before keep their flags, the peak stays.
  void truncate(int32_t end);
  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int capacity() const { return capacity_; }
  int size(int layer, int kv_head) const { return static_cast<int>(head(layer, kv_head).pos.size()); }
  std::span<const int32_t> held(int layer, int kv_head) const { return head(layer, kv_head).pos; }
  std::span<uint8_t> active(int layer, int kv_head) { return head(layer, kv_head).active; }

  // Records n new active entries at positions pos0..pos0+n-1 after the head's last row. Throws
  // std::logic_error past capacity or when pos0 is not after the last held position.
  void push(int layer, int kv_head, int32_t pos0, int n);
  // Removes the entries whose keep[i] == 0 (keep has size() flags) and returns the old row index
  // of every kept entry, ascending: row kept[i] moves to row i.
  std::span<const int32_t> compact(int layer, int kv_head, std::span<const uint8_t> keep);

  std::size_t held_entries() const { return held_entries_; }
  std::size_t peak_entries() const { return peak_entries_; }

 private:
  struct Head {
    std::vector<int32_t> pos;     // [n] ascending
    std::vector<uint8_t> active;  // [n]
  };
  Head& head(int layer, int kv_head) { return heads_[static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head]; }
  const Head& head(int layer, int kv_head) const { return heads_[static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head]; }

  int n_layers_, n_kv_heads_, capacity_;
  std::string owner_;
  std::vector<Head> heads_;     // [n_layers * n_kv_heads]
  std::vector<int32_t> kept_;   // [n] compact()'s answer, reused
  std::size_t held_entries_ = 0;
  std::size_t peak_entries_ = 0;
};

}  // namespace kvs
