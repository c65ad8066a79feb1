// KvPositions: eviction (kept runs moved down, or up where fewer entries precede the evicted ones)
// against an entry-by-entry model of the same cache, over random pushes and evictions: positions,
// flags, rows, whether rows are in order and which rows appends reuse; same_entries and
// same_positions against comparing element by element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "inference/kv_positions.h"

using namespace kvs;

namespace {

// One head, entry by entry: what KvPositions holds.
struct ModelHead {
  std::vector<int32_t> pos, row;
  std::vector<uint8_t> active;
  std::vector<int32_t> free;  // rows no entry sits in, a stack: the back is taken first
  int used = 0;

  void push(int32_t p) {
    int32_t r = used;
    if (!free.empty()) {
      r = free.back();
      free.pop_back();
    } else {
      ++used;
    }
    pos.push_back(p);
    row.push_back(r);
    active.push_back(1);
  }
  void evict(const std::vector<uint8_t>& keep) {
    ModelHead out;
    std::vector<int32_t> freed;  // in entry order; the first one freed is taken first
    for (std::size_t i = 0; i < keep.size(); ++i) {
      if (!keep[i]) {
        freed.push_back(row[i]);
        continue;
      }
      out.pos.push_back(pos[i]);
      out.row.push_back(row[i]);
      out.active.push_back(active[i]);
    }
    free.insert(free.end(), freed.rbegin(), freed.rend());
    pos = out.pos;
    row = out.row;
    active = out.active;
  }
  bool in_order() const {
    for (std::size_t i = 0; i < row.size(); ++i)
      if (row[i] != static_cast<int32_t>(i)) return false;
    return true;
  }
};

template <class T>
std::vector<int32_t> as_vector(std::span<T> s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

}  // namespace

TEST(KvPositions, EvictionMovesKeptRunsAsEntryByEntryWould) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    KvPositions kv(1, 2, 400, "test cache");
    ModelHead model[2];
    int32_t next = 0;
    for (int op = 0; op < 120; ++op) {
      const int n_push = 1 + static_cast<int>(rng() % 4);
      for (int g = 0; g < 2; ++g) {
        kv.push(0, g, next, n_push);
        for (int i = 0; i < n_push; ++i) model[g].push(next + i);
      }
      next += n_push;
      for (int g = 0; g < 2; ++g) {
        const std::size_t n = model[g].pos.size();
        std::vector<uint8_t> keep(n, 1);
        // nothing, one entry, a tail, a random set, the entry after two sinks (the kept ones before
        // it move up), a run in the middle
        switch (rng() % 6) {
          case 0: break;
          case 1: keep[rng() % n] = 0; break;
          case 4: keep[std::min<std::size_t>(2, n - 1)] = 0; break;
          case 2: std::fill(keep.begin() + static_cast<long>(rng() % n), keep.end(), 0); break;
          case 3: for (auto& k : keep) k = rng() % 3 != 0; break;
          default: {
            const std::size_t a = rng() % n, b = std::min(n, a + 1 + rng() % 6);
            std::fill(keep.begin() + static_cast<long>(a), keep.begin() + static_cast<long>(b), 0);
          }
        }
        if (std::count(keep.begin(), keep.end(), 1) == 0) keep[n - 1] = 1;
        const auto act = kv.active(0, g);
        for (std::size_t i = 0; i < n; ++i) act[i] = model[g].active[i] = (i + op) % 4 != 0;
        kv.compact(0, g, keep);
        model[g].evict(keep);
        ASSERT_EQ(as_vector(kv.held(0, g)), model[g].pos) << trial << " " << op;
        ASSERT_EQ(as_vector(kv.rows(0, g)), model[g].row) << trial << " " << op;
        ASSERT_EQ(as_vector(kv.active(0, g)), as_vector(std::span<const uint8_t>(model[g].active)));
        ASSERT_EQ(kv.rows_in_order(0, g), model[g].in_order()) << trial << " " << op;
      }
    }
  }
}

TEST(KvPositions, SameEntriesComparesPositionsFlagsAndRows) {
  KvPositions kv(1, 3, 64, "test cache");
  for (int g = 0; g < 3; ++g) kv.push(0, g, 0, 10);
  EXPECT_TRUE(kv.same_entries(0, 0, 1));  // runs in rows 0..9
  kv.active(0, 1)[4] = 0;
  EXPECT_FALSE(kv.same_entries(0, 0, 1));
  kv.active(0, 0)[4] = 0;
  EXPECT_TRUE(kv.same_entries(0, 0, 1));
  // Heads 1 and 2 drop position 0 and take position 10 in its freed row 0: out of row order, the
  // same entries once head 2 also skips position 4 (head 1's flag moved with its entry).
  std::vector<uint8_t> keep(10, 1);
  keep[0] = 0;
  kv.compact(0, 1, keep);
  kv.compact(0, 2, keep);
  for (int g = 0; g < 3; ++g) kv.push(0, g, 10, 1);
  EXPECT_FALSE(kv.rows_in_order(0, 1));
  EXPECT_FALSE(kv.same_entries(0, 1, 2));
  kv.active(0, 2)[3] = 0;
  EXPECT_TRUE(kv.same_entries(0, 1, 2));
  EXPECT_FALSE(kv.same_entries(0, 0, 1));  // position 0 held by head 0 only
  // Same positions and flags in different rows: each head frees a different row, takes it back
  // for position 4, then drops the other's position.
  KvPositions other(1, 2, 64, "test cache");
  for (int g = 0; g < 2; ++g) other.push(0, g, 0, 4);
  other.compact(0, 0, std::vector<uint8_t>{1, 0, 1, 1});  // 0, 2, 3 in rows 0, 2, 3
  other.compact(0, 1, std::vector<uint8_t>{1, 1, 0, 1});  // 0, 1, 3 in rows 0, 1, 3
  for (int g = 0; g < 2; ++g) other.push(0, g, 4, 1);     // head 0 in row 1, head 1 in row 2
  EXPECT_FALSE(other.same_entries(0, 0, 1));
  other.compact(0, 0, std::vector<uint8_t>{1, 0, 1, 1});  // 0, 3, 4 in rows 0, 3, 1
  other.compact(0, 1, std::vector<uint8_t>{1, 0, 1, 1});  // 0, 3, 4 in rows 0, 3, 2
  EXPECT_EQ(as_vector(other.held(0, 0)), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(as_vector(other.held(0, 1)), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_FALSE(other.same_entries(0, 0, 1));
  EXPECT_EQ(as_vector(other.rows(0, 0)), (std::vector<int32_t>{0, 3, 1}));
}

TEST(KvPositions, SamePositionsAgreesWithComparingThem) {
  using V = std::vector<int32_t>;
  EXPECT_TRUE(same_positions(V{}, V{}));
  EXPECT_TRUE(same_positions(V{4, 5, 6}, V{4, 5, 6}));
  EXPECT_FALSE(same_positions(V{4, 5, 6}, V{5, 6, 7}));  // runs of one length, different starts
  EXPECT_FALSE(same_positions(V{4, 5, 6}, V{4, 5}));
  EXPECT_FALSE(same_positions(V{0, 1, 2, 3}, V{0, 1, 3, 4}));  // a run against a list with a gap
  EXPECT_TRUE(same_positions(V{0, 2, 3, 9}, V{0, 2, 3, 9}));
  EXPECT_FALSE(same_positions(V{0, 2, 3, 9}, V{0, 2, 4, 9}));
  std::mt19937 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = static_cast<int>(rng() % 12);
    V a, b;
    int32_t pa = static_cast<int32_t>(rng() % 3), pb = static_cast<int32_t>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      pa += 1 + (rng() % 5 == 0 ? 1 : 0);
      pb += 1 + (rng() % 5 == 0 ? 1 : 0);
      a.push_back(pa);
      b.push_back(pb);
    }
    EXPECT_EQ(same_positions(a, b), a == b) << trial;
    EXPECT_TRUE(same_positions(a, a));
  }
}
