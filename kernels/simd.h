// The CPU kernels' vector types (GCC vector extensions): 8 and 16 float lanes, and fvec, the
// widest the build targets: 16 lanes with AVX-512 (Zen 5 and recent Xeons run two 512-bit
// multiply-adds a cycle, twice the 8-wide peak), 8 otherwise. Loads and stores are unaligned;
// prefetch_ahead asks for a stream's lines ahead of its loads.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvs::ops {

using f32x8 = float __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));

#ifdef __AVX512F__
using fvec = f32x16;
#else
using fvec = f32x8;
#endif
constexpr int kLanes = sizeof(fvec) / sizeof(float);  // floats per fvec

template <class V>
inline V load_as(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
inline void store_as(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Asks for the cache line `bytes` past p (a software prefetch into L1). The address is computed
// as an integer: it may lie past the end of p's array (a stream's prefetch runs ahead of its
// last load), where pointer arithmetic would be undefined; a prefetch never faults.
inline void prefetch_ahead(const void* p, std::size_t bytes) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + bytes), 0, 3);
}

}  // namespace kvs::ops
