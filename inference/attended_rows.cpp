// The active entries a decode query attends, listed branch-free.
#include "inference/attended_rows.h"

#include <algorithm>

namespace kvs {

std::size_t window_start(std::span<const int32_t> held, int first_pos) {
  if (held.empty() || first_pos <= held.front()) return 0;
  return static_cast<std::size_t>(std::lower_bound(held.begin(), held.end(), first_pos) - held.begin());
}

int list_attended(std::span<const int32_t> held, std::span<const int32_t> rows, std::span<const uint8_t> active,
                  std::size_t j0, int32_t* rows_out, int32_t* pos_out) {
  const std::size_t n_held = held.size();
  int n = 0;
  // Every entry is written where the next listed one goes; only an active one moves that on.
  if (pos_out) {
    for (std::size_t j = j0; j < n_held; ++j) {
      rows_out[n] = rows[j];
      pos_out[n] = held[j];
      n += active[j] != 0;
    }
  } else {
    for (std::size_t j = j0; j < n_held; ++j) {
      rows_out[n] = rows[j];
      n += active[j] != 0;
    }
  }
  return n;
}

void list_attended_slots(std::span<const uint8_t> active, std::size_t j0, int32_t* slots_out) {
  int n = 0;
  for (std::size_t j = j0; j < active.size(); ++j) {
    slots_out[n] = static_cast<int32_t>(j);
    n += active[j] != 0;
  }
}
}  // namespace kvs
