// KvStore: per-(layer, KV head) storage, eviction that frees rows for later appends instead of
// moving rows, byte and peak accounting, independent head sizes, truncation (a rewind), rows that
// never move and a long context's reservation committed only as it fills, 16-bit rows, and
// refusal of inconsistent use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "inference/errors.h"
#include "inference/kv_store.h"
#include "kernels/quant.h"
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

// The key (value) rows of an fp32 store's head.
const float* keys_of(const KvStore& s, int layer, int head) { return static_cast<const float*>(s.keys(layer, head).data); }
const float* values_of(const KvStore& s, int layer, int head) {
  return static_cast<const float*>(s.values(layer, head).data);
}

// Entry i's key and value rows ([2] each), wherever it sits.
const float* entry_key(const KvStore& s, int layer, int head, int i) {
  return keys_of(s, layer, head) + 2 * s.rows(layer, head)[i];
}
const float* entry_value(const KvStore& s, int layer, int head, int i) {
  return values_of(s, layer, head) + 2 * s.rows(layer, head)[i];
}

std::vector<int32_t> rows_of(const KvStore& s, int layer, int head) {
  const auto r = s.rows(layer, head);
  return {r.begin(), r.end()};
}

TEST(KvStore, EvictKeepsOrderAndLaterEntriesTakeTheFreedRows) {
  KvStore s(2, 2, 2, 100);
  append_positions(s, 1, 0, 0, 6);
  EXPECT_TRUE(s.rows_in_order(1, 0));
  s.active(1, 0)[4] = 0;
  const std::vector<uint8_t> keep = {1, 0, 1, 0, 1, 1};
  s.evict(1, 0, keep);
  const auto held = s.held(1, 0);
  EXPECT_EQ(std::vector<int32_t>(held.begin(), held.end()), (std::vector<int32_t>{0, 2, 4, 5}));
  const auto active = s.active(1, 0);
  EXPECT_EQ(std::vector<uint8_t>(active.begin(), active.end()), (std::vector<uint8_t>{1, 1, 0, 1}));
  ASSERT_EQ(s.size(1, 0), 4);
  EXPECT_EQ(rows_of(s, 1, 0), (std::vector<int32_t>{0, 2, 4, 5}));  // nothing moved
  EXPECT_FALSE(s.rows_in_order(1, 0));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(entry_key(s, 1, 0, i)[0], float(held[i]));
    EXPECT_EQ(entry_value(s, 1, 0, i)[1], -held[i] - 0.5f);
  }
  // New entries take the freed rows, the lowest first, then fresh ones.
  const float* before = keys_of(s, 1, 0);
  append_positions(s, 1, 0, 6, 9);
  EXPECT_EQ(keys_of(s, 1, 0), before);
  EXPECT_EQ(rows_of(s, 1, 0), (std::vector<int32_t>{0, 2, 4, 5, 1, 3, 6}));
  EXPECT_EQ(s.rows_used(1, 0), 7);
  for (int i = 4; i < 7; ++i) EXPECT_EQ(entry_key(s, 1, 0, i)[0], float(2 + i));
  EXPECT_EQ(s.held(1, 0).back(), 8);
  EXPECT_EQ(s.active(1, 0).back(), 1);
}

// StreamingLLM's eviction: the oldest entry after the sinks leaves every step. No row moves; the
// next token's entry takes the freed row, so the head never uses more rows than it holds.
TEST(KvStore, EvictingOneEntryAStepMovesNoRow) {
  KvStore s(1, 1, 2, 100);
  append_positions(s, 0, 0, 0, 8);
  for (int step = 0; step < 20; ++step) {
    std::vector<uint8_t> keep(8, 1);
    keep[1] = 0;  // one sink, then the oldest
    const std::vector<int32_t> rows_before = rows_of(s, 0, 0);
    s.evict(0, 0, keep);
    std::vector<int32_t> expect = rows_before;
    expect.erase(expect.begin() + 1);
    EXPECT_EQ(rows_of(s, 0, 0), expect);
    append_positions(s, 0, 0, 8 + step, 9 + step);
    EXPECT_EQ(s.rows(0, 0).back(), rows_before[1]);
    EXPECT_EQ(s.rows_used(0, 0), 8);
  }
  const auto held = s.held(0, 0);
  EXPECT_EQ(held[0], 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(entry_key(s, 0, 0, i)[0], float(held[i]));
    EXPECT_EQ(entry_key(s, 0, 0, i)[1], held[i] + 0.5f);
    EXPECT_EQ(entry_value(s, 0, 0, i)[1], -held[i] - 0.5f);
  }
}

// Random appends, evictions and rewinds against a plain list of (position, key) entries: every
// entry reads back its own row, rows are distinct, and a head uses no more rows than the most
// entries it held at once.
TEST(KvStore, EntriesReadTheirOwnRowsThroughAnyHistory) {
  KvStore s(1, 1, 2, 64);
  std::mt19937 rng(7);
  std::vector<int32_t> want;  // positions held, ascending
  int next = 0, most = 0;
  for (int it = 0; it < 400; ++it) {
    const int op = static_cast<int>(rng() % 4);
    if (op <= 1 && static_cast<int>(want.size()) < 64) {
      const int n = 1 + static_cast<int>(rng() % std::min<std::size_t>(5, 64 - want.size()));
      append_positions(s, 0, 0, next, next + n);
      for (int p = next; p < next + n; ++p) want.push_back(p);
      next += n;
    } else if (op == 2) {
      std::vector<uint8_t> keep(want.size());
      std::vector<int32_t> kept;
      for (std::size_t i = 0; i < want.size(); ++i) {
        keep[i] = rng() % 3 != 0;
        if (keep[i]) kept.push_back(want[i]);
      }
      s.evict(0, 0, keep);
      want = kept;
    } else if (!want.empty()) {
      const int32_t end = want[rng() % want.size()];
      s.truncate(end);
      want.erase(std::lower_bound(want.begin(), want.end(), end), want.end());
      next = end;
    }
    most = std::max(most, static_cast<int>(want.size()));
    const auto held = s.held(0, 0);
    ASSERT_EQ(std::vector<int32_t>(held.begin(), held.end()), want);
    const std::vector<int32_t> rows = rows_of(s, 0, 0);
    EXPECT_EQ(std::set<int32_t>(rows.begin(), rows.end()).size(), rows.size());
    EXPECT_LE(s.rows_used(0, 0), most);
    bool in_order = true;
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_LT(rows[i], s.rows_used(0, 0));
      ASSERT_EQ(entry_key(s, 0, 0, static_cast<int>(i))[0], float(want[i]));
      in_order = in_order && rows[i] == static_cast<int32_t>(i);
    }
    EXPECT_EQ(s.rows_in_order(0, 0), in_order);
  }
}

// A rewind of a head whose rows are in order leaves them in order: the next appends take the
// dropped rows back in position order.
TEST(KvStore, ARewoundHeadStaysInOrder) {
  KvStore s(1, 1, 2, 100);
  append_positions(s, 0, 0, 0, 10);
  s.truncate(6);
  append_positions(s, 0, 0, 6, 12);
  EXPECT_TRUE(s.rows_in_order(0, 0));
  EXPECT_EQ(s.rows_used(0, 0), 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(keys_of(s, 0, 0)[2 * i], float(i));
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

// A 16-bit store keeps each key and value rounded to nearest even (fp16: 11 significant bits with
// subnormals, bf16: 8 with fp32's range), in rows half an fp32 row's size: read back widened,
// through the raw rows the attention kernels read, in the rows eviction frees, and counted at 2
// bytes an element.
TEST(KvStore, SixteenBitRowsHoldTheRoundedNumbers) {
  for (const ops::RowType type : {ops::RowType::F16, ops::RowType::BF16}) {
    SCOPED_TRACE(type == ops::RowType::F16 ? "fp16" : "bf16");
    const int hd = 5;
    KvStore s(2, 2, hd, 64, type);
    EXPECT_EQ(s.type(), type);
    auto rounded = [&](float x) { return type == ops::RowType::F16 ? fp16_to_fp32(fp32_to_fp16(x)) : bf16_to_fp32(fp32_to_bf16(x)); };
    auto bits = [&](float x) { return type == ops::RowType::F16 ? fp32_to_fp16(x) : fp32_to_bf16(x); };
    // Key of position p: {p / 3, 1 + 2^-12 (a tie in bf16, not in fp16), -p * 1000.1, 6e-6, 70000}.
    auto key = [](int p) { return std::vector<float>{p / 3.0f, 1.0f + 0x1p-12f, -p * 1000.1f, 6e-6f, 70000.0f}; };
    auto value = [](int p) { return std::vector<float>{-p / 7.0f, 0.1f, p * 3.3f, -2.5e-7f, 1e-3f}; };
    for (int p = 0; p < 10; ++p) s.append(1, 1, p, 1, key(p).data(), value(p).data(), hd);
    s.evict(1, 1, std::vector<uint8_t>{1, 0, 1, 1, 0, 1, 1, 1, 1, 1});  // rows 1 and 4 are freed
    for (int p = 10; p < 12; ++p) s.append(1, 1, p, 1, key(p).data(), value(p).data(), hd);
    EXPECT_EQ(std::vector<int32_t>(s.rows(1, 1).begin(), s.rows(1, 1).end()),
              (std::vector<int32_t>{0, 2, 3, 5, 6, 7, 8, 9, 1, 4}));
    const std::vector<int> held = {0, 2, 3, 5, 6, 7, 8, 9, 10, 11};
    std::vector<float> k(hd), v(hd);
    for (std::size_t i = 0; i < held.size(); ++i) {
      const int32_t row = s.rows(1, 1)[i];
      s.read_key(1, 1, row, k.data());
      s.read_value(1, 1, row, v.data());
      const auto* raw_k = static_cast<const uint16_t*>(s.keys(1, 1).data) + static_cast<std::size_t>(row) * hd;
      const auto* raw_v = static_cast<const uint16_t*>(s.values(1, 1).data) + static_cast<std::size_t>(row) * hd;
      for (int d = 0; d < hd; ++d) {
        EXPECT_EQ(k[d], rounded(key(held[i])[d])) << "position " << held[i] << ", component " << d;
        EXPECT_EQ(v[d], rounded(value(held[i])[d])) << "position " << held[i] << ", component " << d;
        EXPECT_EQ(raw_k[d], bits(key(held[i])[d]));
        EXPECT_EQ(raw_v[d], bits(value(held[i])[d]));
      }
    }
    if (type == ops::RowType::F16) {
      EXPECT_TRUE(std::isinf(k[4]));  // past fp16's range
      EXPECT_NE(k[3], 0.0f);          // a subnormal kept
    } else {
      EXPECT_EQ(k[4], 70144.0f);
      EXPECT_EQ(k[1], 1.0f);  // the tie to the even upper half
    }
    EXPECT_EQ(s.bytes(), 10 * 2 * hd * 2u);
    EXPECT_EQ(KvStore::bytes_for(2, 2, hd, 10, type), KvStore::bytes_for(2, 2, hd, 10) / 2);
  }
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
  append_positions(s, 0, 1, 8, 9);  // takes the row position 8 had
  EXPECT_EQ(s.held(0, 1).back(), 8);
  EXPECT_EQ(s.rows(0, 1)[3], 8);
  EXPECT_EQ(entry_key(s, 0, 1, 3)[0], 8.0f);
  EXPECT_EQ(s.active(0, 1).back(), 1);
}

TEST(KvStore, BatchAppendReadsStridedRows) {
  KvStore s(1, 2, 2, 8);
  // Two tokens of a [n, 2 heads * 2] layout; head 1 starts at offset 2.
  const float k[8] = {0, 1, 2, 3, 10, 11, 12, 13}, v[8] = {4, 5, 6, 7, 14, 15, 16, 17};
  s.append(0, 1, 0, 2, k + 2, v + 2, 4);
  EXPECT_EQ(std::vector<float>(keys_of(s, 0, 1), keys_of(s, 0, 1) + 4), (std::vector<float>{2, 3, 12, 13}));
  EXPECT_EQ(std::vector<float>(values_of(s, 0, 1), values_of(s, 0, 1) + 4), (std::vector<float>{6, 7, 16, 17}));
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
  const float* k = keys_of(s, 1, 2);
  const float* v = values_of(s, 1, 2);
  append_positions(s, 1, 2, 0, 3000);  // one by one, to the last row
  EXPECT_EQ(keys_of(s, 1, 2), k);
  EXPECT_EQ(values_of(s, 1, 2), v);
  for (int p : {0, 1234, 2999}) {
    EXPECT_EQ(k[2 * p], float(p));
    EXPECT_EQ(v[2 * p + 1], -p - 0.5f);
  }
  // Neighbouring heads' slabs are untouched by a full one.
  append_positions(s, 1, 1, 0, 1);
  append_positions(s, 0, 2, 0, 1);
  EXPECT_EQ(keys_of(s, 1, 1)[1], 0.5f);
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
  for (int p : {0, 4095, 4096, 8999}) EXPECT_EQ(keys_of(s, 0, 1)[static_cast<std::size_t>(p) * 128], float(p));
  EXPECT_EQ(values_of(s, 0, 1)[8999 * 128], 8999.0f);
  EXPECT_EQ(keys_of(s, 1, 1)[0], 0.0f);  // untouched slabs read as zeros
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
  EXPECT_EQ(test::anon_huge_bytes(keys_of(s, 0, 0)), 0u);
  s.append(0, 0, 4000, 200, rows.data(), rows.data(), 64);  // past it: K's and V's ranges collapse
  EXPECT_EQ(test::anon_huge_bytes(keys_of(s, 0, 0)), 2 * huge);
  EXPECT_EQ(keys_of(s, 0, 0)[4199 * 64], 1.0f);
}

// A context no address space holds (64 x 64 heads of 2^30 positions: 4 PiB) is refused with a
// line that names the cache, the bytes asked and those available, not a bare std::bad_alloc.
TEST(KvStore, AContextNoAddressSpaceHoldsIsAOneLineError) {
  try {
    KvStore s(64, 64, 128, 1 << 30);
    FAIL() << "reserved 4 PiB";
  } catch (const InputError& e) {
    const std::string line = e.what();
    EXPECT_NE(line.find("KV cache: cannot reserve 4194304.0 GiB of address space for 1073741824 positions "
                        "(8192 slabs of 512.0 GiB); "),
              std::string::npos)
        << line;
    EXPECT_TRUE(line.ends_with(" available") || line.ends_with("the memory left is unknown")) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace kvs
