// The trimming loop shared by the position-only policies.
#include "analysis/policy_positional.h"

namespace kvs {

void PositionalPolicy::after_prefill(int, KvSlots& kv) {
  for (int l = 0; l < kv.n_layers(); ++l) trim(l, kv);
}

void PositionalPolicy::after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) {
  trim(layer, kv);
}

void PositionalPolicy::trim(int layer, KvSlots& kv) const {
  std::vector<uint8_t> keep;  // [held]
  for (int g = 0; g < kv.n_kv_heads(); ++g) {
    const auto held = kv.held(layer, g);
    if (static_cast<int>(held.size()) <= capacity()) continue;
    keep.assign(held.size(), 0);
    keep_mask(held, keep);
    kv.evict(layer, g, keep);
  }
}

}  // namespace kvs
