// Huge-page-backed allocation for weight tensors and the KV cache's reservation (see huge_pages.h).
#include "inference/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1's synchronous collapse; the glibc 2.36 headers lack the name
#endif

namespace kvs {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kSmallPage = 4096;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// `size` bytes (a multiple of 4 KiB) of fresh anonymous memory starting on a 2 MiB boundary: over-map
// by one huge page, then unmap the slack before and after the aligned block, so every whole 2 MiB
// range in it can be a huge page. The tail past the last whole huge page stays on small pages.
void* map_aligned(std::size_t size, int extra_flags) {
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto begin = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(begin, kHugePage);
  if (aligned > begin) munmap(raw, aligned - begin);
  const std::uintptr_t end = begin + size + kHugePage;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

void* huge_page_alloc(std::size_t bytes) {
  if (bytes < kHugePage) {
    void* p = std::aligned_alloc(64, round_up(bytes == 0 ? 1 : bytes, 64));
    if (!p) throw std::bad_alloc();
    return p;
  }
  if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();  // the roundings would wrap
  const std::size_t size = round_up(bytes, kSmallPage);
  void* p = map_aligned(size, 0);
  advise_huge_pages(p, size);
  return p;
}

void huge_page_free(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kHugePage) {
    std::free(p);
    return;
  }
  munmap(p, round_up(bytes, kSmallPage));
}

void* reserve_pages(std::size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();  // the roundings would wrap
  return map_aligned(round_up(bytes == 0 ? 1 : bytes, kSmallPage), MAP_NORESERVE);
}

void release_pages(void* p, std::size_t bytes) noexcept {
  if (p) munmap(p, round_up(bytes == 0 ? 1 : bytes, kSmallPage));
}

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: refused (THP off) leaves small pages
}

bool collapse_huge_pages(void* p, std::size_t bytes) noexcept {
  // Refused by kernels before 6.1 (EINVAL), or with no huge page free (EAGAIN, ENOMEM).
  return madvise(p, bytes, MADV_COLLAPSE) == 0;
}

}  // namespace kvs
