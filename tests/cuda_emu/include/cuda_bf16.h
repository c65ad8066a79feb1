// CUDA emulator (tests only): __nv_bfloat16 as bfloat16 storage with the conversions the kernels
// use, rounding to nearest even as the device does.
#pragma once
#include <cstdint>

#include "cuda_runtime_api.h"  // float2

struct __nv_bfloat16 {
  std::uint16_t bits;
};

__nv_bfloat16 __float2bfloat16_rn(float f);
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
float __bfloat162float(__nv_bfloat16 h);

// Two bfloat16 in 4 bytes, as the device's __nv_bfloat162.
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
