// Dequantization of F16, BF16 and the GGML block formats Q8_0, Q4_0, Q4_1 to fp32.
// Block layouts follow ggml-common.h: x = d*q (Q8_0), d*(q-8) (Q4_0), d*q + m (Q4_1); in the
// 4-bit formats byte j holds weight j in its low nibble and weight j+16 in its high nibble.
#include "kernels/quant.h"

#include <cstring>

namespace kvs {
namespace {

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // subnormal half: normalise the mantissa
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_fp32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void dequantize_f16(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
}

void dequantize_bf16(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
}

void dequantize_q8_0(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kQ8_0BlockBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
    float* out = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock; ++j) out[j] = d * static_cast<float>(qs[j]);
  }
}

void dequantize_q4_0(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kQ4_0BlockBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const uint8_t* qs = block + 2;
    float* out = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      out[j + kQuantBlock / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kQ4_1BlockBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const float m = fp16_to_fp32(load_u16(block + 2));
    const uint8_t* qs = block + 4;
    float* out = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      out[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
      out[j + kQuantBlock / 2] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

}  // namespace kvs
