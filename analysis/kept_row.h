// One (step, layer, KV head) row of a run's kept set (RunData::kept: 1 attended, 2 held but
// inactive, 0 absent), written from what the cache holds; both drivers record it every layer.
#pragma once
#include <cstdint>
#include <span>

namespace kvs {

// row[held[i]] = 1 where active[i], else 2; row has a byte per position, zero where not held.
void mark_kept(std::span<const int32_t> held, std::span<const uint8_t> active, uint8_t* row);

}  // namespace kvs
