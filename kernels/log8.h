// Natural log over eight float lanes (GCC vector extensions), for the per-step entropy of
// attention rows: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(x) = e ln2 + log(m), log(m) by
// a degree-9 polynomial in m - 1 (Cephes' logf coefficients). Absolute error < 2e-7 for x in
// [FLT_MIN, FLT_MAX] where |log x| < 1, relative error < 2e-7 elsewhere
// (tests/kernels/elementwise_test.cpp). Positive normal inputs only: zeros, subnormals,
// negatives, infinities and NaN give unspecified values (callers mask them).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/exp8.h"  // f32x8

namespace kvs::ops {

// log(x) per lane, x a positive normal float.
inline f32x8 log8(f32x8 x) {
  using i32x8 = int32_t __attribute__((vector_size(32)));
  constexpr float kSqrtHalf = 0.707106781186547524f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // kLn2Hi + kLn2Lo = ln 2
  i32x8 bits;
  std::memcpy(&bits, &x, sizeof bits);
  i32x8 e = ((bits >> 23) & 0xff) - 126;             // x = m * 2^e, m in [0.5, 1)
  const i32x8 m_bits = (bits & 0x007fffff) | 0x3f000000;
  f32x8 m;
  std::memcpy(&m, &m_bits, sizeof m);
  const auto low = m < kSqrtHalf;                    // m in [0.5, sqrt(1/2)): use 2m, e - 1
  e = low ? e - 1 : e;
  const f32x8 r = (low ? m + m : m) - 1.0f;          // in [sqrt(1/2) - 1, sqrt(2) - 1)
  const f32x8 ef = __builtin_convertvector(e, f32x8);
  const f32x8 z = r * r;
  f32x8 p = f32x8{} + 7.0376836292e-2f;
  p = p * r - 1.1514610310e-1f;
  p = p * r + 1.1676998740e-1f;
  p = p * r - 1.2420140846e-1f;
  p = p * r + 1.4249322787e-1f;
  p = p * r - 1.6668057665e-1f;
  p = p * r + 2.0000714765e-1f;
  p = p * r - 2.4999993993e-1f;
  p = p * r + 3.3333331174e-1f;
  f32x8 y = p * r * z + ef * kLn2Lo - 0.5f * z;
  return (r + y) + ef * kLn2Hi;
}

}  // namespace kvs::ops
