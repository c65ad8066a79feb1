// Tick positions for the views' axes: round numbers (1, 2 or 5 times a power of ten apart).
#pragma once
#include <vector>

namespace kvs {

// Integer ticks in [lo, hi], multiples of the smallest step of 1, 2, 5, 10, 20, ... that gives at
// most `max_ticks` of them (at least one step of 1; empty when hi < lo).
std::vector<int> axis_ticks(double lo, double hi, int max_ticks);

}  // namespace kvs
