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

// Whether ascending, distinct positions are consecutive: the last is the first plus the count
// less one (true when empty). O(1).
bool consecutive(std::span<const int32_t> positions);
// Whether two heads hold the same positions (each list ascending, its positions distinct): O(1)
// where both are runs of consecutive positions.
bool same_positions(std::span<const int32_t> a, std::span<const int32_t> b);

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
  int size(int layer, int kv_head) const { return static_cast<int>(head(layer, kv_head).size()); }
  std::span<const int32_t> held(int layer, int kv_head) const { return head(layer, kv_head).held(); }
  std::span<uint8_t> active(int layer, int kv_head) { return head(layer, kv_head).flags(); }
  // The storage row of each held entry ([size], all different, each < rows_used()).
  std::span<const int32_t> rows(int layer, int kv_head) const { return head(layer, kv_head).rows(); }
  // Whether entry i sits in row i for every held entry (nothing evicted out of order yet).
  bool rows_in_order(int layer, int kv_head) const { return head(layer, kv_head).in_order; }
  // Whether KV heads a and b of the layer hold the same entries: positions, flags and rows. O(1)
  // but for the flags where neither evicted out of order (runs of positions in rows 0..n-1).
  bool same_entries(int layer, int a, int b) const;
  // Storage rows the head has used so far: every row an entry sits in is below it.
  int rows_used(int layer, int kv_head) const { return head(layer, kv_head).used; }
  // rows_used() once n more entries were pushed (free rows are taken first).
  int rows_used_after(int layer, int kv_head, int n) const;

  // Records n new active entries at positions pos0..pos0+n-1 after the head's last entry, in free
  // rows (the most recently freed first), then in fresh ones. Throws std::logic_error past
  // capacity or when pos0 is not after the last held position.
  void push(int layer, int kv_head, int32_t pos0, int n);
  // Removes the entries whose keep[i] == 0 (keep has size() flags); their rows become free. The
  // kept entries on the shorter side of the evicted ones move over them a run at a time: one
  // entry evicted near the front each step moves the few entries before it, not the rest.
  void compact(int layer, int kv_head, std::span<const uint8_t> keep);

  std::size_t held_entries() const { return held_entries_; }
  std::size_t peak_entries() const { return peak_entries_; }

 private:
  // The held entries are those from `first` on in each list; the ones before it were evicted
  // from the front (the kept entries before them moved up) and are dropped once they outnumber
  // the held ones.
  struct Head {
    std::vector<int32_t> pos;     // [first + n] ascending from first
    std::vector<uint8_t> active;  // [first + n]
    std::vector<int32_t> row;     // [first + n] storage row of each entry
    std::size_t first = 0;
    std::vector<int32_t> free;    // [used - n] rows no entry sits in; the back is taken first
    int used = 0;                 // rows ever taken: 0..used-1
    bool in_order = true;         // row[first + i] == i for every held i
    std::size_t size() const { return pos.size() - first; }
    std::span<const int32_t> held() const { return std::span<const int32_t>(pos).subspan(first); }
    std::span<uint8_t> flags() { return std::span<uint8_t>(active).subspan(first); }
    std::span<const uint8_t> flags() const { return std::span<const uint8_t>(active).subspan(first); }
    std::span<const int32_t> rows() const { return std::span<const int32_t>(row).subspan(first); }
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
