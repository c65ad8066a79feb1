// RowListEdits: the edits it stages, applied by ops::edit_row_list (the CPU twin of the device
// kernel) to the copy a device would hold, give each head's rows as KvPositions holds them, through
// any history of appends, evictions (several between two steps, of copied and of appended
// entries), lists given other than the held rows and forgotten copies; a step that evicts one
// entry and appends one sends those two ints, not the list.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "inference/kv_positions.h"
#include "inference/row_list_edits.h"
#include "kernels/row_lists.h"

namespace kvs {
namespace {

// KvPositions and RowListEdits fed the same pushes and evictions (as CudaKvCache feeds them), and
// the device copy of each head's list as the staged edits leave it.
struct Mirror {
  Mirror(int n_layers, int n_kv, int capacity)
      : pos(n_layers, n_kv, capacity, "test"), edits(n_layers, n_kv),
        copy(static_cast<std::size_t>(n_layers) * n_kv) {}
  void push(int l, int g, int32_t pos0, int n) {
    pos.push(l, g, pos0, n);
    const auto rows = pos.rows(l, g);
    edits.appended(l, g, rows.subspan(rows.size() - n));
  }
  void evict(int l, int g, const std::vector<uint8_t>& keep) {
    edits.evicted(l, g, keep);
    pos.compact(l, g, keep);
  }
  // Stages the head's held rows and applies the edit to its copy; returns the payload ints sent.
  int sync(int l, int g) {
    std::vector<int32_t> payload(2 * pos.capacity() + 8, -1);
    ops::RowListEdit e{};
    const int sent = edits.stage(l, g, pos.rows(l, g), 3, e, payload.data());
    std::vector<int32_t>& c = copy[static_cast<std::size_t>(l) * pos.n_kv_heads() + g];
    EXPECT_EQ(e.offset, 3);
    EXPECT_EQ(e.n_removed + e.n_new, sent);
    EXPECT_TRUE(e.n_src == 0 || e.n_src == static_cast<int>(c.size())) << "the edit starts from the copy";
    std::vector<int32_t> next(e.n_src - e.n_removed + e.n_new);
    ops::edit_row_list(next.data(), nullptr, c.data(), e, payload.data());
    c = next;
    return sent;
  }
  std::vector<int32_t> rows(int l, int g) const {
    const auto r = pos.rows(l, g);
    return {r.begin(), r.end()};
  }
  const std::vector<int32_t>& device(int l, int g) const {
    return copy[static_cast<std::size_t>(l) * pos.n_kv_heads() + g];
  }
  KvPositions pos;
  RowListEdits edits;
  std::vector<std::vector<int32_t>> copy;  // [n_layers * n_kv] the device copy of each list
};

std::vector<uint8_t> keep_all_but(std::size_t n, std::initializer_list<int> gone) {
  std::vector<uint8_t> keep(n, 1);
  for (int i : gone) keep[i] = 0;
  return keep;
}

TEST(RowListEdits, AStepThatEvictsOneEntryAndAppendsOneSendsTwoInts) {
  Mirror m(1, 1, 100);
  m.push(0, 0, 0, 40);
  m.evict(0, 0, keep_all_but(40, {4}));  // after the prompt: the list is first sent whole
  EXPECT_EQ(m.sync(0, 0), 39);
  ASSERT_EQ(m.device(0, 0), m.rows(0, 0));
  for (int step = 0; step < 20; ++step) {
    m.push(0, 0, 40 + step, 1);  // into the row the last eviction freed
    EXPECT_EQ(m.sync(0, 0), step == 0 ? 1 : 2) << "step " << step;  // (the eviction, the append)
    ASSERT_EQ(m.device(0, 0), m.rows(0, 0)) << "step " << step;
    m.evict(0, 0, keep_all_but(40, {4}));  // StreamingLLM: the oldest entry after 4 sinks
  }
}

// An edit as long as the list it leaves is sent as that list.
TEST(RowListEdits, AnEditAsLongAsTheListSendsTheList) {
  Mirror m(1, 1, 100);
  m.push(0, 0, 0, 10);
  EXPECT_EQ(m.sync(0, 0), 10);
  m.evict(0, 0, keep_all_but(10, {0, 1, 2, 3, 4, 5, 6, 7}));
  m.push(0, 0, 10, 1);
  EXPECT_EQ(m.sync(0, 0), 3);  // 8 removed + 1 new would be 9 ints for a list of 3
  EXPECT_EQ(m.device(0, 0), m.rows(0, 0));
}

// Random pushes, evictions (none, one or several between two steps, of copied and of appended
// entries), lists given other than the held rows (the next step sends the held rows whole) and
// rewinds (every copy forgotten) over 2 layers of 3 heads: after every step each copy equals the
// held rows, and most steps send edits.
TEST(RowListEdits, RandomHistoriesLeaveEveryCopyEqualToTheHeldRows) {
  const int L = 2, G = 3, cap = 64;
  Mirror m(L, G, cap);
  std::mt19937 rng(11);
  int32_t next = 0;  // the next position (shared by every head, as a sequence's)
  int edits = 0, wholes = 0;
  for (int step = 0; step < 600; ++step) {
    // Between two steps: pushes and evictions per head.
    const int n_new = 1 + static_cast<int>(rng() % 3);
    for (int l = 0; l < L; ++l) {
      for (int g = 0; g < G; ++g) {
        const int evictions = static_cast<int>(rng() % 3);
        for (int e = 0; e < evictions; ++e) {
          const std::size_t n = m.pos.size(l, g);
          std::vector<uint8_t> keep(n, 1);
          for (std::size_t i = 0; i < n; ++i) keep[i] = rng() % 9 != 0;
          m.evict(l, g, keep);
        }
        if (m.pos.size(l, g) + n_new > cap) {  // keep room: evict every other entry
          std::vector<uint8_t> keep(m.pos.size(l, g));
          for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = i % 2;
          m.evict(l, g, keep);
        }
        m.push(l, g, next, n_new);
      }
    }
    next += n_new;
    if (rng() % 50 == 0) {  // a rewind
      const int32_t end = next - 1 - static_cast<int32_t>(rng() % 4);
      m.pos.truncate(end);
      m.edits.forget_all();
      next = end;
      continue;
    }
    for (int l = 0; l < L; ++l) {
      for (int g = 0; g < G; ++g) {
        if (rng() % 10 == 0) {  // a list of some entries this step: the copy holds no held list
          ops::RowListEdit e{};
          m.edits.stage_other(l, g, 1, 0, true, e);
          EXPECT_EQ(e.n_src, 0);
          EXPECT_EQ(e.slots_given, 1);
          m.copy[static_cast<std::size_t>(l) * G + g] = {-1};
          continue;
        }
        const int n = m.pos.size(l, g);
        const int sent = m.sync(l, g);
        (sent < n ? edits : wholes) += 1;
        ASSERT_EQ(m.device(l, g), m.rows(l, g)) << "step " << step << " layer " << l << " head " << g;
      }
    }
  }
  EXPECT_GT(edits, 5 * wholes) << "most steps send edits";
}

TEST(RowListEdits, EvictionFlagsThatDoNotMatchTheEntriesAreRefused) {
  Mirror m(1, 1, 20);
  m.push(0, 0, 0, 5);
  m.sync(0, 0);
  EXPECT_THROW(m.edits.evicted(0, 0, std::vector<uint8_t>(4, 1)), std::logic_error);
}

}  // namespace
}  // namespace kvs
