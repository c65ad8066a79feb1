// A kept-set row written a stretch of consecutive positions at a time.
#include "analysis/kept_row.h"

#include "inference/kv_positions.h"

namespace kvs {

void mark_kept(std::span<const int32_t> held, std::span<const uint8_t> active, uint8_t* row) {
  const size_t n = held.size();
  if (n == 0) return;
  // A stretch of consecutive positions is written as one row segment; others are halved down to
  // short pieces written entry by entry (a window after a few sinks takes a handful of segments).
  if (consecutive(held)) {
    uint8_t* seg = row + held[0];
    for (size_t i = 0; i < n; ++i) seg[i] = active[i] ? 1 : 2;
  } else if (n <= 64) {
    for (size_t i = 0; i < n; ++i) row[held[i]] = active[i] ? 1 : 2;
  } else {
    mark_kept(held.first(n / 2), active.first(n / 2), row);
    mark_kept(held.subspan(n / 2), active.subspan(n / 2), row);
  }
}

}  // namespace kvs
