// A kept-set row written a block of consecutive positions at a time, and a layer's rows with
// the rows of KV heads that hold the same entries copied.
#include "analysis/kept_row.h"

#include <algorithm>
#include <cstring>

#include "analysis/parallel_for.h"
#include "inference/kv_positions.h"

namespace kvs {
namespace {

// row[held[i]] = 1 where active[i], else 2; row has a byte per position, zero where not held.
// Returns how many entries were written one at a time (not within a stretch of consecutive
// positions): the held list's scatter.
std::size_t mark_kept(std::span<const int32_t> held, std::span<const uint8_t> active, uint8_t* row) {
  // Blocks of 64 entries: a block of consecutive positions, with the blocks after it that go on
  // consecutively (a window after a few sinks), is written as one row segment; any other block
  // entry by entry. (Ascending, distinct: a stretch whose last position is its first plus its
  // length - 1 holds every position in between.)
  constexpr std::size_t kBlock = 64;
  const std::size_t n = held.size();
  const int32_t* pos = held.data();  // [n]
  const auto run = [&](std::size_t from, std::size_t to) {  // entries from..to-1 consecutive
    return static_cast<std::size_t>(pos[to - 1] - pos[from]) == to - 1 - from;
  };
  std::size_t singles = 0;
  for (std::size_t b = 0; b < n;) {
    std::size_t e = std::min(b + kBlock, n);
    if (run(b, e)) {
      // The stretch goes on to where it ends, found by doubling steps of blocks, then halving
      // them (a handful of positions read, not one a block: held lists are long and cold).
      std::size_t step = kBlock;
      for (; e < n && run(b, std::min(e + step, n)); step *= 2) e = std::min(e + step, n);
      while (step > kBlock) {
        step /= 2;
        if (e < n && run(b, std::min(e + step, n))) e = std::min(e + step, n);
      }
      uint8_t* seg = row + pos[b] - b;
      for (std::size_t i = b; i < e; ++i) seg[i] = active[i] ? 1 : 2;
    } else {
      for (std::size_t i = b; i < e; ++i) row[pos[i]] = active[i] ? 1 : 2;
      singles += e - b;
    }
    b = e;
  }
  return singles;
}

}  // namespace

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
