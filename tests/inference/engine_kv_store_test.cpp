// KvStore: per-(layer, KV head) storage, in-place compaction on evict, byte and peak accounting,
// independent head sizes, and refusal of inconsistent use.
#include <gtest/gtest.h>

#include <stdexcept>

#include "inference/kv_store.h"

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

}  // namespace
}  // namespace kvs
