// CUDA emulator (tests only): __half as IEEE binary16 storage with the host conversions.
#pragma once
#include <cstdint>

#include "cuda_runtime_api.h"  // float2

struct __half {
  std::uint16_t bits;
};

__half __float2half_rn(float f);  // round to nearest even, as the device does
inline __half __float2half(float f) { return __float2half_rn(f); }
float __half2float(__half h);

// Two halves in 4 bytes, as the device's __half2.
struct alignas(4) __half2 {
  __half x, y;
};
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
