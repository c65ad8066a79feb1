// CUDA emulator (tests only): __half as IEEE binary16 storage with the host conversions.
#pragma once
#include <cstdint>

struct __half {
  std::uint16_t bits;
};

__half __float2half_rn(float f);  // round to nearest even, as the device does
inline __half __float2half(float f) { return __float2half_rn(f); }
float __half2float(__half h);
