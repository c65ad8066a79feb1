// 16-bit floats read by the CPU kernels: fp16 and bf16 element types (for templates that read
// rows of either, or of float) and their exact widening to fp32, eight at a time with F16C's
// vcvtph2ps (fp16) or AVX2's 16-bit shift (bf16) where the build has them, lane by lane
// otherwise. Conversions from fp32 (rounding) are in quant.h.
#pragma once
#include <cstdint>

#if defined(__AVX2__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/quant.h"
#include "kernels/simd.h"

namespace kvs::ops {

struct f16 {  // IEEE half
  uint16_t bits;
};
struct bf16 {  // bfloat16: the upper half of an fp32
  uint16_t bits;
};

inline float to_f32(float x) { return x; }
inline float to_f32(f16 x) { return fp16_to_fp32(x.bits); }
inline float to_f32(bf16 x) { return bf16_to_fp32(x.bits); }

// The eight E at p (any alignment) as fp32, lane by lane.
template <class E>
inline f32x8 widen8_lanes(const void* p) {
  f32x8 v;
  for (int i = 0; i < 8; ++i) v[i] = to_f32(load_as<E>(static_cast<const char*>(p) + i * sizeof(E)));
  return v;
}

// The eight fp16 at p (any alignment) as fp32.
inline f32x8 widen8_f16(const void* p) {
#ifdef __F16C__
  return reinterpret_cast<f32x8>(_mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))));
#else
  return widen8_lanes<f16>(p);
#endif
}

// The eight bf16 at p (any alignment) as fp32.
inline f32x8 widen8_bf16(const void* p) {
#ifdef __AVX2__
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  return reinterpret_cast<f32x8>(_mm256_slli_epi32(v, 16));
#else
  return widen8_lanes<bf16>(p);
#endif
}

// Eight elements from p as fp32.
inline f32x8 load8(const float* p) { return load_as<f32x8>(p); }
inline f32x8 load8(const f16* p) { return widen8_f16(p); }
inline f32x8 load8(const bf16* p) { return widen8_bf16(p); }

}  // namespace kvs::ops
