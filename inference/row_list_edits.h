// What changed in each KV head's row list (the storage rows of its held entries, in held order)
// since a copy of the list was last written to the device: the copied entries evicted since and the
// rows of the entries appended since. CudaKvCache keeps the lists on the device and uploads these
// edits each decode step instead of the lists themselves (4 bytes a key per head and layer, 16 MB
// a step at 16K keys on an 8B model): a policy that evicts one entry a step sends a few ints a head.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/row_lists.h"

namespace kvs {

class RowListEdits {
 public:
  RowListEdits(int n_layers, int n_kv_heads);

  // No device copy holds a usable list any more (a cleared or rewound cache): the next staging
  // of each head writes its list whole.
  void forget_all();
  // The head evicted the entries whose keep flag is 0 (keep: one flag per entry held before).
  void evicted(int layer, int kv_head, std::span<const uint8_t> keep);
  // The head appended entries in these storage rows.
  void appended(int layer, int kv_head, std::span<const int32_t> rows);

  // Stages the head's list `rows` (its held entries' rows now) for the device at payload + offset:
  // as the edit of the copy last staged when that copy holds the head's list and the edit is
  // shorter than the list, else the list whole. Fills `edit`; returns the payload ints written.
  // The device copy holds `rows` once the edit has run.
  int stage(int layer, int kv_head, std::span<const int32_t> rows, int offset, ops::RowListEdit& edit,
            int32_t* payload);
  // Stages a list other than the head's held rows (those of some entries), which the caller wrote
  // at payload + offset: n rows, then their n slots when `slots`. The device copy then holds no
  // list that later edits apply to.
  void stage_other(int layer, int kv_head, int n, int offset, bool slots, ops::RowListEdit& edit);

 private:
  struct Head {
    bool synced = false;            // the device copy holds the list as staged last (n_synced rows)
    int n_synced = 0;
    std::vector<int32_t> removed;   // indices of that list evicted since, ascending
    std::vector<int32_t> added;     // rows of the entries appended since and still held
    int size() const { return n_synced - static_cast<int>(removed.size()) + static_cast<int>(added.size()); }
  };
  Head& head(int layer, int kv_head) { return heads_[static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head]; }
  static void forget(Head& h);

  int n_kv_heads_;
  std::vector<Head> heads_;  // [n_layers * n_kv_heads]
};

}  // namespace kvs
