// The active entries a decode query attends, as the CPU engine and the CUDA backend list them:
// against a plain filter over random heads (windows, flags, out-of-order rows).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "inference/attended_rows.h"

using namespace kvs;

namespace {

struct Head {
  std::vector<int32_t> held, rows;  // [n] ascending positions, their storage rows
  std::vector<uint8_t> active;      // [n]
};

Head random_head(std::mt19937& rng, int n, double p_active) {
  Head h;
  std::bernoulli_distribution gap(0.3), on(p_active);
  int32_t pos = static_cast<int32_t>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    pos += 1 + (gap(rng) ? static_cast<int32_t>(rng() % 3) : 0);
    h.held.push_back(pos);
    h.rows.push_back(i);
    h.active.push_back(on(rng) ? 1 : 0);
  }
  std::shuffle(h.rows.begin(), h.rows.end(), rng);
  return h;
}

}  // namespace

TEST(AttendedRows, WindowStartIsTheFirstHeldPositionInTheWindow) {
  const std::vector<int32_t> held{2, 3, 7, 9, 12};
  EXPECT_EQ(window_start(held, 0), 0u);
  EXPECT_EQ(window_start(held, -5), 0u);
  EXPECT_EQ(window_start(held, 2), 0u);
  EXPECT_EQ(window_start(held, 4), 2u);
  EXPECT_EQ(window_start(held, 9), 3u);
  EXPECT_EQ(window_start(held, 13), 5u);
  EXPECT_EQ(window_start({}, 3), 0u);
}

TEST(AttendedRows, ListsTheActiveEntriesFromTheWindowOn) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 70);
    const Head h = random_head(rng, n, trial % 3 == 0 ? 0.9 : 0.3);
    const int first_pos = trial % 2 ? h.held[rng() % n] + static_cast<int>(rng() % 2) : 0;
    const std::size_t j0 = window_start(h.held, first_pos);
    std::vector<int32_t> want_rows, want_pos, want_slots;
    for (int j = 0; j < n; ++j) {
      if (h.held[j] < first_pos || !h.active[j]) continue;
      want_rows.push_back(h.rows[j]);
      want_pos.push_back(h.held[j]);
      want_slots.push_back(j);
    }
    // Outputs sized as the callers size them (room for every entry from j0 on), the rows and
    // their slots packed one after the other as the CUDA backend uploads them.
    const std::size_t room = h.held.size() - j0;
    std::vector<int32_t> packed(2 * room, -1), pos(room, -1), rows_only(room, -1);
    const int got = list_attended(h.held, h.rows, h.active, j0, packed.data(), pos.data());
    list_attended_slots(h.active, j0, packed.data() + got);
    ASSERT_EQ(got, static_cast<int>(want_rows.size())) << trial;
    EXPECT_EQ(std::vector<int32_t>(packed.begin(), packed.begin() + got), want_rows) << trial;
    EXPECT_EQ(std::vector<int32_t>(packed.begin() + got, packed.begin() + 2 * got), want_slots) << trial;
    EXPECT_EQ(std::vector<int32_t>(pos.begin(), pos.begin() + got), want_pos) << trial;
    EXPECT_EQ(list_attended(h.held, h.rows, h.active, j0, rows_only.data(), nullptr), got);
    EXPECT_EQ(std::vector<int32_t>(rows_only.begin(), rows_only.begin() + got), want_rows) << trial;
  }
}
