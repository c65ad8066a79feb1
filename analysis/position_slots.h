// KvSlots over positions only (no K/V storage): what the simulator drives policies with.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inference/hooks.h"

namespace kvs {

class PositionSlots : public KvSlots {
 public:
  PositionSlots(int n_layers, int n_kv_heads);
  int n_layers() const override { return n_layers_; }
  int n_kv_heads() const override { return n_kv_heads_; }
  std::span<const int32_t> held(int layer, int kv_head) const override { return pos_[idx(layer, kv_head)]; }
  std::span<uint8_t> active(int layer, int kv_head) override { return act_[idx(layer, kv_head)]; }
  std::span<const uint8_t> active(int layer, int kv_head) const { return act_[idx(layer, kv_head)]; }
  // Throws std::logic_error when keep has the wrong length.
  void evict(int layer, int kv_head, std::span<const uint8_t> keep) override;
  // Appends position `pos` (greater than every held one) as held and active.
  void append(int layer, int kv_head, int32_t pos);
  // Every (layer, KV head) holds positions 0..n-1, all active.
  void fill_prompt(int n);

 private:
  size_t idx(int layer, int kv_head) const { return (size_t)layer * n_kv_heads_ + kv_head; }
  int n_layers_, n_kv_heads_;
  std::vector<std::vector<int32_t>> pos_;  // [L * Hkv][held] ascending positions
  std::vector<std::vector<uint8_t>> act_;  // [L * Hkv][held] 1 = attended next, 0 = inactive
};

}  // namespace kvs
