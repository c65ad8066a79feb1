// Which held entries of one KV head a decode query attends, listed the same way by the CPU engine
// and the CUDA backend each step: the active entries from the sliding window's first position on,
// as their storage rows (and positions, slots). At 32K keys this runs per layer and KV head every
// step, between a layer's q/k/v product and its attention, where a GPU waits for the host.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace kvs {

// The index of the first held position >= first_pos (held ascends): where a sliding window's
// attended entries begin; 0 without a window (first_pos <= 0).
std::size_t window_start(std::span<const int32_t> held, int first_pos);

// Lists the active entries i >= j0 (active[i] != 0) in held order: each one's storage row
// (rows[i]) to rows_out and, where pos_out is given, its position (held[i]) to pos_out. Returns
// how many. Branch-free (which flags are set is unpredictable): it also writes the entry after
// the last one listed, so each output needs room for held.size() - j0 values.
int list_attended(std::span<const int32_t> held, std::span<const int32_t> rows, std::span<const uint8_t> active,
                  std::size_t j0, int32_t* rows_out, int32_t* pos_out);

// The same entries' slots (each one's index i among the held entries) to slots_out, which needs
// room for active.size() - j0 values (one past the last slot is written too).
void list_attended_slots(std::span<const uint8_t> active, std::size_t j0, int32_t* slots_out);

}  // namespace kvs
