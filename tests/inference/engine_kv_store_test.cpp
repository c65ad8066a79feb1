// KvStore: per-(layer, KV head) storage, in-place compaction on evict, byte and peak accounting,
// independent head sizes, truncation (a rewind), rows that never move and a long context's
// reservation committed only as it fills, and refusal of inconsistent use.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "inference/errors.h"
#include "inference/kv_store.h"
#include "tests/inference/resident_memory.h"

namespace kvs {
namespace {

// Key row of position p: {p, p + 0.5}; value row: {-p, -p - 0.5}.
void append_positions(KvStore& s, int layer, int head, int from, int to) {
  for (int p = from; p < to; ++p) {
    const float k[2] = {float(p), p + 0.5f}, v[2] = {-float(p), -p - 0.5f};
    s.append(layer, head, p, 1, k, v, 2);
  }
}

TEST(KvStore, EvictCompactsInPlaceAndKeepsOrder) {
  KvStore s(2, 2, 2, 100);
  append_positions(s, 1, 0, 0, 6);
  s.active(1, 0)[4] = 0;
  const std::vector<uint8_t> keep = {1, 0, 1, 0, 1, 1};
  s.evict(1, 0, keep);
  const auto held = s.held(1, 0);
  EXPECT_EQ(std::vector<int32_t>(held.begin(), held.end()), (std::vector<int32_t>{0, 2, 4, 5}));
  const auto active = s.active(1, 0);
  EXPECT_EQ(std::vector<uint8_t>(active.begin(), active.end()), (std::vector<uint8_t>{1, 1, 0, 1}));
  ASSERT_EQ(s.size(1, 0), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.keys(1, 0)[2 * i], float(held[i]));
    EXPECT_EQ(s.values(1, 0)[2 * i + 1], -held[i] - 0.5f);
  }
  // New entries land after the compacted ones, reusing the storage.
  const float* before = s.keys(1, 0);
  append_positions(s, 1, 0, 6, 8);
  EXPECT_EQ(s.keys(1, 0), before);
  EXPECT_EQ(s.keys(1, 0)[2 * 4], 6.0f);
  EXPECT_EQ(s.held(1, 0).back(), 7);
  EXPECT_EQ(s.active(1, 0).back(), 1);
}

// StreamingLLM's eviction: the oldest entry after the sinks leaves, and every later row moves
// down one place as one run (source and destination overlap).
TEST(KvStore, EvictingOneEntryMovesEveryLaterRowDownOne) {
  KvStore s(1, 1, 2, 100);
  append_positions(s, 0, 0, 0, 8);
  s.evict(0, 0, std::vector<uint8_t>{1, 0, 1, 1, 1, 1, 1, 1});
  const auto held = s.held(0, 0);
  EXPECT_EQ(std::vector<int32_t>(held.begin(), held.end()), (std::vector<int32_t>{0, 2, 3, 4, 5, 6, 7}));
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(s.keys(0, 0)[2 * i], float(held[i]));
    EXPECT_EQ(s.keys(0, 0)[2 * i + 1], held[i] + 0.5f);
    EXPECT_EQ(s.values(0, 0)[2 * i + 1], -held[i] - 0.5f);
  }
}

TEST(KvStore, BytesCountHeldEntriesAndPeak) {
  KvStore s(1, 3, 2, 100);
  const std::size_t entry = 2 * 2 * sizeof(float);
  append_positions(s, 0, 0, 0, 10);
  append_positions(s, 0, 1, 0, 4);
  EXPECT_EQ(s.bytes(), 14 * entry);
  s.evict(0, 0, std::vector<uint8_t>(10, 0));
  EXPECT_EQ(s.bytes(), 4 * entry);
  EXPECT_EQ(s.peak_bytes(), 14 * entry);
  EXPECT_EQ(s.size(0, 0), 0);
  EXPECT_EQ(s.size(0, 2), 0);  // heads are independent: no padding to the largest
  s.clear();
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.peak_bytes(), 0u);
}

// A truncation drops each head's entries from a position on, whatever each head holds before
// it (some evicted, some inactive), and later entries are appended after what is left.
TEST(KvStore, TruncateDropsTheEntriesFromAPositionOn) {
  KvStore s(1, 2, 2, 100);
  const std::size_t entry = 2 * 2 * sizeof(float);
  append_positions(s, 0, 0, 0, 10);
  append_positions(s, 0, 1, 0, 10);
  s.evict(0, 1, std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 0, 1, 1, 1});  // head 1: 0 1 7 8 9
  s.active(0, 0)[2] = 0;
  s.truncate(8);
  const auto held0 = s.held(0, 0), held1 = s.held(0, 1);
  EXPECT_EQ(std::vector<int32_t>(held0.begin(), held0.end()), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(std::vector<int32_t>(held1.begin(), held1.end()), (std::vector<int32_t>{0, 1, 7}));
  EXPECT_EQ(s.active(0, 0)[2], 0);  // flags before the cut stay
  EXPECT_EQ(s.bytes(), 11 * entry);
  EXPECT_EQ(s.peak_bytes(), 20 * entry);
  append_positions(s, 0, 1, 8, 9);
  EXPECT_EQ(s.held(0, 1).back(), 8);
  EXPECT_EQ(s.keys(0, 1)[2 * 3], 8.0f);
  EXPECT_EQ(s.active(0, 1).back(), 1);
}

TEST(KvStore, BatchAppendReadsStridedRows) {
  KvStore s(1, 2, 2, 8);
  // Two tokens of a [n, 2 heads * 2] layout; head 1 starts at offset 2.
  const float k[8] = {0, 1, 2, 3, 10, 11, 12, 13}, v[8] = {4, 5, 6, 7, 14, 15, 16, 17};
  s.append(0, 1, 0, 2, k + 2, v + 2, 4);
  EXPECT_EQ(std::vector<float>(s.keys(0, 1), s.keys(0, 1) + 4), (std::vector<float>{2, 3, 12, 13}));
  EXPECT_EQ(std::vector<float>(s.values(0, 1), s.values(0, 1) + 4), (std::vector<float>{6, 7, 16, 17}));
}

TEST(KvStore, RefusesInconsistentUse) {
  KvStore s(1, 1, 2, 4);
  append_positions(s, 0, 0, 0, 4);
  const float row[2] = {0, 0};
  EXPECT_THROW(s.append(0, 0, 9, 1, row, row, 2), std::logic_error);  // beyond max_len
  EXPECT_THROW(s.evict(0, 0, std::vector<uint8_t>(3, 1)), std::logic_error);
  s.evict(0, 0, std::vector<uint8_t>{1, 1, 0, 0});
  EXPECT_THROW(s.append(0, 0, 1, 1, row, row, 2), std::logic_error);  // not after position 1
}

TEST(KvStore, RowsNeverMoveAsHeadsFillToTheContext) {
  KvStore s(2, 3, 2, 3000);
  const float* k = s.keys(1, 2);
  const float* v = s.values(1, 2);
  append_positions(s, 1, 2, 0, 3000);  // one by one, to the last row
  EXPECT_EQ(s.keys(1, 2), k);
  EXPECT_EQ(s.values(1, 2), v);
  for (int p : {0, 1234, 2999}) {
    EXPECT_EQ(k[2 * p], float(p));
    EXPECT_EQ(v[2 * p + 1], -p - 0.5f);
  }
  // Neighbouring heads' slabs are untouched by a full one.
  append_positions(s, 1, 1, 0, 1);
  append_positions(s, 0, 2, 0, 1);
  EXPECT_EQ(s.keys(1, 1)[1], 0.5f);
  EXPECT_EQ(k[0], 0.0f);
}

TEST(KvStore, ALongContextCommitsOnlyWhatItHolds) {
  // 2 layers x 2 KV heads x 128-wide rows at 128K positions: 512 MiB of K and V reserved.
  KvStore s(2, 2, 128, 131072);
  const std::size_t before = test::resident_bytes();
  std::vector<float> row(128);
  for (int p = 0; p < 9000; ++p) {  // 4.4 MiB per slab: through two huge-page ranges' middles
    row[0] = float(p);
    s.append(0, 1, p, 1, row.data(), row.data(), 128);
  }
  for (int p : {0, 4095, 4096, 8999}) EXPECT_EQ(s.keys(0, 1)[static_cast<std::size_t>(p) * 128], float(p));
  EXPECT_EQ(s.values(0, 1)[8999 * 128], 8999.0f);
  EXPECT_EQ(s.keys(1, 1)[0], 0.0f);  // untouched slabs read as zeros
  // K and V hold 8.8 MiB; at most 2 MiB ahead of use per slab on top of it, nowhere near 512.
  EXPECT_LT(test::resident_bytes() - before, std::size_t{24} << 20);
}

// A slab past half of a 2 MiB range gets that range as a huge page (where the kernel collapses
// ranges at all: the probe below finds out).
TEST(KvStore, ALargeArenasSlabsTurnHugeAsTheyFill) {
  const std::size_t huge = std::size_t{2} << 20;
  void* probe = reserve_pages(huge);
  static_cast<char*>(probe)[0] = 1;
  const bool kernel_collapses = collapse_huge_pages(probe, huge);
  release_pages(probe, huge);
  if (!kernel_collapses) GTEST_SKIP() << "the kernel refused MADV_COLLAPSE (before Linux 6.1, or no free huge page)";
  KvStore s(30, 3, 64, 8192);  // SmolLM2's cache: 360 MiB reserved, one 2 MiB range per slab
  std::vector<float> rows(4200 * 64, 1.0f);
  s.append(0, 0, 0, 4000, rows.data(), rows.data(), 64);  // 1000 KiB: under the middle
  EXPECT_EQ(test::anon_huge_bytes(s.keys(0, 0)), 0u);
  s.append(0, 0, 4000, 200, rows.data(), rows.data(), 64);  // past it: K's and V's ranges collapse
  EXPECT_EQ(test::anon_huge_bytes(s.keys(0, 0)), 2 * huge);
  EXPECT_EQ(s.keys(0, 0)[4199 * 64], 1.0f);
}

// A context no address space holds (64 x 64 heads of 2^30 positions: 4 PiB) is refused with a
// line that names the cache, not a bare std::bad_alloc.
TEST(KvStore, AContextNoAddressSpaceHoldsIsAOneLineError) {
  try {
    KvStore s(64, 64, 128, 1 << 30);
    FAIL() << "reserved 4 PiB";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache: cannot reserve 8192 slabs of 524288 MiB for 1073741824 positions"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvs
