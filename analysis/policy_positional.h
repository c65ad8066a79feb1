// Base of the policies that decide by position alone (window, StreamingLLM, strided): after the
// prompt and after every decode attention, each (layer, KV head) over budget is cut by a mask.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "analysis/policy.h"

namespace kvs {

class PositionalPolicy : public Policy {
 public:
  void begin(const PolicyContext&) override {}
  void after_prefill(int, KvSlots& kv) override;
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) override;
  bool needs_decode_rows(int) const override { return false; }  // positions only

 protected:
  using Policy::Policy;
  // Entries one (layer, KV head) may hold; more are cut with keep_mask.
  virtual int capacity() const = 0;
  // keep[i] = 1 for the held[i] that stay, given held.size() > capacity().
  virtual void keep_mask(std::span<const int32_t> held, std::vector<uint8_t>& keep) const = 0;

 private:
  void trim(int layer, KvSlots& kv) const;
};

}  // namespace kvs
