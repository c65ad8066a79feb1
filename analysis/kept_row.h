// A step's layer of a run's kept set (RunData::kept: per KV head, a row with a byte a position:
// 1 attended, 2 held but inactive, 0 absent), written from what the cache holds; both drivers
// record it every layer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/hooks.h"

namespace kvs {

// A layer's kept rows at a decode step, one each KV head, as both drivers record them.
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
