// Position-only KvSlots used by the simulator.
#include "analysis/position_slots.h"

#include <stdexcept>

namespace kvs {

PositionSlots::PositionSlots(int n_layers, int n_kv_heads)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads),
      pos_((size_t)n_layers * n_kv_heads), act_((size_t)n_layers * n_kv_heads) {}

void PositionSlots::evict(int layer, int kv_head, std::span<const uint8_t> keep) {
  auto& p = pos_[idx(layer, kv_head)];
  auto& a = act_[idx(layer, kv_head)];
  if (keep.size() != p.size()) throw std::logic_error("PositionSlots::evict: keep has the wrong length");
  size_t o = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!keep[i]) continue;
    p[o] = p[i];
    a[o] = a[i];
    ++o;
  }
  p.resize(o);
  a.resize(o);
}

void PositionSlots::append(int layer, int kv_head, int32_t pos) {
  pos_[idx(layer, kv_head)].push_back(pos);
  act_[idx(layer, kv_head)].push_back(1);
}

void PositionSlots::fill_prompt(int n) {
  for (size_t i = 0; i < pos_.size(); ++i) {
    pos_[i].resize(n);
    for (int j = 0; j < n; ++j) pos_[i][j] = j;
    act_[i].assign(n, 1);
  }
}

}  // namespace kvs
