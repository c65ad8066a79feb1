// IEEE 754 binary16 conversions: round to nearest even, subnormals, infinities and NaN kept.
#include "analysis/float16.h"

#include <cstring>

namespace kvs {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN (NaN keeps a set mantissa bit)
    return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {                                      // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return (uint16_t)sign;               // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24: value = mant * 2^(exp-150), unit 2^-24
    const uint32_t q = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t r = q + (rest > half || (rest == half && (q & 1u)));
    return (uint16_t)(sign | r);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits.
  const uint32_t v = abs - 0x38000000u;  // exponent - 112
  const uint32_t q = v >> 13;
  const uint32_t rest = v & 0x1fffu;
  const uint32_t r = q + (rest > 0x1000u || (rest == 0x1000u && (q & 1u)));
  return (uint16_t)(sign | r);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    x = sign;
  } else {  // subnormal: normalise
    int e = -1;
    uint32_t m = mant;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    x = sign | ((uint32_t)(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void floats_to_halves(std::span<const float> in, uint16_t* out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_half(in[i]);
}

}  // namespace kvs
