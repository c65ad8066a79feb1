// A kept-set row written a stretch of consecutive positions at a time, and a layer's rows with
// the rows of KV heads that hold the same entries copied.
#include "analysis/kept_row.h"

#include <algorithm>
#include <cstring>

#include "analysis/parallel_for.h"
#include "inference/kv_positions.h"

namespace kvs {

std::size_t mark_kept(std::span<const int32_t> held, std::span<const uint8_t> active, uint8_t* row) {
  const size_t n = held.size();
  if (n == 0) return 0;
  // A stretch of consecutive positions is written as one row segment; others are halved down to
  // short pieces written entry by entry (a window after a few sinks takes a handful of segments).
  if (consecutive(held)) {
    uint8_t* seg = row + held[0];
    for (size_t i = 0; i < n; ++i) seg[i] = active[i] ? 1 : 2;
    return 0;
  }
  if (n <= 64) {
    for (size_t i = 0; i < n; ++i) row[held[i]] = active[i] ? 1 : 2;
    return n;
  }
  return mark_kept(held.first(n / 2), active.first(n / 2), row) +
         mark_kept(held.subspan(n / 2), active.subspan(n / 2), row);
}

void LayerKeptRows::write(KvSlots& kv, int layer, uint8_t* rows, std::size_t T) {
  const int Hkv = kv.n_kv_heads();
  const auto held = [&](int g) { return kv.held(layer, g); };
  const auto active = [&](int g) { return std::span<const uint8_t>(kv.active(layer, g)); };
  const bool compare = scattered_[layer] != 0;
  std::vector<uint8_t> copy(Hkv, 0);  // [Hkv] holds what head 0 holds: its row copied after
  parallel_for(Hkv, [&](int g) {
    if (g > 0 && compare && same_positions(held(0), held(g)) &&
        std::ranges::equal(active(0), active(g))) {
      copy[g] = 1;
      return;
    }
    const std::size_t singles = mark_kept(held(g), active(g), rows + g * T);
    if (g == 0) scattered_[layer] = 4 * singles > held(0).size();
  }, worth_a_team(static_cast<long>(held(0).size()) * Hkv));
  // Head 0's held positions span its row's written part; the rest of every row is zero.
  const std::span<const int32_t> first = held(0);
  if (first.empty() || std::ranges::find(copy, 1) == copy.end()) return;
  const std::size_t from = first.front(), width = first.back() - from + 1;
  parallel_for(Hkv, [&](int g) {
    if (copy[g]) std::memcpy(rows + g * T + from, rows + from, width);
  }, worth_a_team(static_cast<long>(width) * Hkv));
}

}  // namespace kvs
