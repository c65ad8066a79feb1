// Weight and KV-cache storage backed by transparent huge pages. Decode streams every weight once
// per token; with 4 KiB pages the TLB misses (two-level walks under a hypervisor) cost a third of
// the bandwidth, so tensors of 2 MiB and more get their own 2 MiB-aligned mapping advised
// MADV_HUGEPAGE, and the KV cache (kv_store.h) reserves its context's address space up front.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace kvs {

// Raw storage: at least `bytes`, 64-byte aligned; large blocks 2 MiB-aligned with huge pages
// requested (granted or not by the kernel: the memory is valid either way). Throws std::bad_alloc.
void* huge_page_alloc(std::size_t bytes);
void huge_page_free(void* p, std::size_t bytes) noexcept;

// Address space for `bytes`, 2 MiB-aligned, committed page by page as first touched and not
// charged against overcommit until then (MAP_NORESERVE): a cache reserved for a long context costs
// only what it holds. Throws std::bad_alloc.
void* reserve_pages(std::size_t bytes);
void release_pages(void* p, std::size_t bytes) noexcept;
// Advice on [p, p + bytes): huge pages from each range's first touch on (MADV_HUGEPAGE), or huge
// pages now for 2 MiB-aligned ranges already partly touched (MADV_COLLAPSE, copying what they
// hold; true when the kernel did). Refused advice leaves small pages; the memory is valid either
// way.
void advise_huge_pages(void* p, std::size_t bytes) noexcept;
bool collapse_huge_pages(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(huge_page_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { huge_page_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// A weight tensor's fp32 values (row-major).
using WeightVector = std::vector<float, HugePageAllocator<float>>;

}  // namespace kvs
