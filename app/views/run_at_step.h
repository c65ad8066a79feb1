// What a run has at the step shown: a free live run whose text ended before the step has no
// cache there (every key absent), which a lane would otherwise draw as every key evicted.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace kvs {

// kept: one step of a run, [L, Hkv, T] (1 attended, 2 inactive, 0 absent).
inline bool run_holds_keys(const std::vector<uint8_t>& kept) {
  return std::any_of(kept.begin(), kept.end(), [](uint8_t k) { return k != 0; });
}

// In place of such a run's lane.
inline std::string run_ended_note(int step) {
  return "its text ended before step " + std::to_string(step) + ": no cache to show";
}

}  // namespace kvs
