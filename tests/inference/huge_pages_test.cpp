// Huge-page storage: alignment, full usable size, vector semantics (copy, resize), reserved
// address space committed only where touched, and collapsing a touched range into a huge page.
#include "inference/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "tests/inference/resident_memory.h"

namespace kvs {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(HugePages, LargeBlocksStartOnA2MiBBoundaryAndAreWritableToTheEnd) {
  for (const std::size_t bytes : {std::size_t{2} << 20, (std::size_t{5} << 20) + 12, std::size_t{37} << 20}) {
    auto* p = static_cast<unsigned char*>(huge_page_alloc(bytes));
    EXPECT_EQ(address(p) % (std::size_t{2} << 20), 0u) << bytes;
    for (std::size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<unsigned char>(i >> 12);
    p[bytes - 1] = 0xAB;
    for (std::size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], static_cast<unsigned char>(i >> 12));
    EXPECT_EQ(p[bytes - 1], 0xAB);
    huge_page_free(p, bytes);
  }
}

TEST(HugePages, SmallBlocksAreCacheLineAligned) {
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, (std::size_t{2} << 20) - 1}) {
    void* p = huge_page_alloc(bytes);
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
    huge_page_free(p, bytes);
  }
}

TEST(HugePages, WeightVectorBehavesLikeAVector) {
  WeightVector v(3u << 20);  // 12 MiB: mapped
  std::iota(v.begin(), v.end(), 0.0f);
  WeightVector copy = v;
  EXPECT_EQ(copy, v);
  copy.resize(10);  // shrinking keeps the block
  copy.shrink_to_fit();  // small: heap
  EXPECT_EQ(copy.size(), 10u);
  EXPECT_EQ(copy[9], 9.0f);
  v.clear();
  v.shrink_to_fit();
  EXPECT_TRUE(v.empty());
}

TEST(HugePages, ImpossibleSizesThrowBadAlloc) {
  HugePageAllocator<float> a;
  EXPECT_THROW(a.allocate(static_cast<std::size_t>(-1) / 2), std::bad_alloc);
  EXPECT_THROW(huge_page_alloc(static_cast<std::size_t>(-1) - 100), std::bad_alloc);
}

TEST(HugePages, ReservedSpaceIsCommittedOnlyWhereTouched) {
  const std::size_t bytes = std::size_t{1} << 30;  // 1 GiB of address space
  auto* p = static_cast<unsigned char*>(reserve_pages(bytes));
  EXPECT_EQ(address(p) % (std::size_t{2} << 20), 0u);
  const std::size_t before = test::resident_bytes();
  for (std::size_t i = 0; i < bytes; i += std::size_t{64} << 20) p[i] = 7;  // one byte in every 64 MiB
  EXPECT_LT(test::resident_bytes() - before, std::size_t{8} << 20);
  EXPECT_EQ(p[std::size_t{128} << 20], 7);
  EXPECT_EQ(p[bytes - 1], 0);
  release_pages(p, bytes);
}

TEST(HugePages, CollapseMakesAHalfTouchedRangeOneHugePageAndKeepsItsBytes) {
  const std::size_t huge = std::size_t{2} << 20;
  auto* p = static_cast<unsigned char*>(reserve_pages(2 * huge));
  for (std::size_t i = 0; i < huge / 2; ++i) p[i] = static_cast<unsigned char>(i * 31);
  if (!collapse_huge_pages(p, huge)) {
    release_pages(p, 2 * huge);
    GTEST_SKIP() << "the kernel refused MADV_COLLAPSE (before Linux 6.1, or no free huge page)";
  }
  EXPECT_GE(test::anon_huge_bytes(p), huge);
  for (std::size_t i = 0; i < huge / 2; ++i) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 31)) << i;
  EXPECT_EQ(p[huge - 1], 0);
  release_pages(p, 2 * huge);
}

}  // namespace
}  // namespace kvs
