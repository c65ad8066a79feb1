// One (step, layer, KV head) row of a run's kept set (RunData::kept: 1 attended, 2 held but
// inactive, 0 absent), written from what the cache holds; both drivers record it every layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "inference/hooks.h"

namespace kvs {

// row[held[i]] = 1 where active[i], else 2; row has a byte per position, zero where not held.
// Returns how many entries were written one at a time (not within a stretch of consecutive
// positions): the held list's scatter.
std::size_t mark_kept(std::span<const int32_t> held, std::span<const uint8_t> active, uint8_t* row);

// A layer's kept rows, the live run's controller writing one each KV head a decode step.
class LayerKeptRows {
 public:
  explicit LayerKeptRows(int n_layers) : scattered_(n_layers, 0) {}
  // rows: [Hkv, T], zero; T above every held position. The KV heads are written side by side. A
  // head that holds what KV head 0 holds (positions and flags: TOVA's heads, which evict alike)
  // gets a copy of head 0's row when that was scattered at the layer's last step (H2O's and
  // TOVA's after a few evictions): comparing two lists then costs less than writing the row entry
  // by entry. Other heads (sinks and a window) are written as they are, nothing compared.
  void write(KvSlots& kv, int layer, uint8_t* rows, std::size_t T);

 private:
  std::vector<uint8_t> scattered_;  // [L] KV head 0's row written mostly entry by entry last time
};

}  // namespace kvs
