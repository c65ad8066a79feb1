// exp over 8 or 16 float lanes (GCC vector extensions), for softmax and SwiGLU: range reduction
// to r in [-ln2/2, ln2/2] and a degree-6 polynomial; relative error < 2e-7 against the exact
// exponential (tests/kernels/elementwise_test.cpp), 0 below FLT_MIN, inf above FLT_MAX.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/simd.h"

namespace kvs::ops {

// The 32-bit integer vector of a float vector's width.
template <class V>
struct IntLanes;
template <>
struct IntLanes<f32x8> {
  using type = int32_t __attribute__((vector_size(32)));
};
template <>
struct IntLanes<f32x16> {
  using type = int32_t __attribute__((vector_size(64)));
};

// exp(x) per lane of f32x8 or f32x16 (the same result in every lane either way).
template <class V>
inline V exp_lanes(V x) {
  using I = typename IntLanes<V>::type;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // kLn2Hi + kLn2Lo = ln 2
  constexpr float kRound = 12582912.0f;                               // 1.5 * 2^23
  constexpr float kMin = -87.33654f;                                  // below: under FLT_MIN
  constexpr float kMax = 88.37626f;                                   // above: over FLT_MAX
  const V xc = x < kMin ? V{} + kMin : (x > kMax ? V{} + kMax : x);
  // n = round(x / ln 2), read off the low mantissa bits of t.
  const V t = xc * kLog2e + kRound;
  const V n = t - kRound;
  I ti;
  std::memcpy(&ti, &t, sizeof ti);
  const V r = (xc - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n built in the exponent field; n + 127 lies in [1, 254] after the clamp.
  const I scale_bits = (ti - 0x4B400000 + 127) << 23;
  V scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  V e = p * scale;
  e = x < kMin ? V{} : e;                                                 // exp(-inf) = 0
  e = x > kMax ? V{} + std::numeric_limits<float>::infinity() : e;        // overflow
  return x != x ? x : e;                                                  // NaN stays NaN
}

inline f32x8 exp8(f32x8 x) { return exp_lanes(x); }

}  // namespace kvs::ops
