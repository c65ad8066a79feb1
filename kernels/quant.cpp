// Dequantization of F16, BF16, the GGML block formats Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, the
// K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS to fp32. Block layouts follow ggml-common.h:
// x = d*q (Q8_0), d*(q-8) (Q4_0), d*q + m (Q4_1), d*(q-16) (Q5_0), d*q + m (Q5_1), d*level[q]
// (IQ4_NL; IQ4_XS with d times a six-bit scale per 32 weights); in the 4- and 5-bit formats byte
// j holds weight j in its low nibble and weight j+16 in its high nibble. The K-quant decoders follow ggml's dequantize_row_q*_K, weight order
// and float operation order included: x = (d*sc)*q - dmin*m per sub-block.
#include "kernels/quant.h"

#include <cstring>

namespace kvs {
namespace {

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t load_u32(const uint8_t* p) { return load_u16(p) | static_cast<uint32_t>(load_u16(p + 2)) << 16; }

// Five-bit quant j (< 32) of a Q5_0 / Q5_1 block: the low nibble of qs[j] (j < 16) or the high
// nibble of qs[j - 16], with bit j of qh above it.
int five_bit(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kQuantBlock / 2 ? qs[j] & 0x0f : qs[j - kQuantBlock / 2] >> 4;
  return nibble | static_cast<int>((qh >> j) & 1) << 4;
}

// The IQ4_NL code book: 16 non-uniform levels, denser near zero where most weights lie.
constexpr int8_t kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// 32 weights from 16 code bytes: weight j < 16 the low nibble of qs[j], j + 16 its high nibble.
void iq4_codes(const uint8_t* qs, float d, float* out) {
  for (int j = 0; j < kQuantBlock / 2; ++j) {
    out[j] = d * static_cast<float>(kIQ4Levels[qs[j] & 0x0f]);
    out[j + kQuantBlock / 2] = d * static_cast<float>(kIQ4Levels[qs[j] >> 4]);
  }
}

// Six-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K / Q5_K (ggml's
// get_scale_min_k4): bytes 0-3 hold scales 0-3, bytes 4-7 mins 0-3 (low six bits each); scales
// and mins 4-7 take their low four bits from the nibbles of bytes 8-11 and their top two bits
// from the spare top bits of bytes 0-3 (scales) and 4-7 (mins).
void scale_min_k4(const uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K: the factors of the two 32-weight sub-blocks 2g and 2g+1 of 64-weight group g,
// weight = d1 * q - m1 (first 32) or d2 * q - m2 (next 32).
struct GroupFactors {
  float d1, m1, d2, m2;
};
GroupFactors group_factors_k4(const uint8_t* scales, int g, float d, float dmin) {
  int sc, m;
  GroupFactors f;
  scale_min_k4(scales, 2 * g, sc, m);
  f.d1 = d * static_cast<float>(sc);
  f.m1 = dmin * static_cast<float>(m);
  scale_min_k4(scales, 2 * g + 1, sc, m);
  f.d2 = d * static_cast<float>(sc);
  f.m2 = dmin * static_cast<float>(m);
  return f;
}

// Signed six-bit scale of 16-weight sub-block j (0..15) from the 12 packed bytes of Q3_K: low four
// bits from byte j (j < 8) or the high nibble of byte j-8; top two bits from byte 8 + j%4 at bit
// 2*(j/4); stored with an offset of 32.
int scale_q3_k(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

uint16_t fp32_to_fp16(float f) {
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

void round_to_fp16(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

float load_half(const uint8_t* p) { return fp16_to_fp32(load_u16(p)); }

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

uint16_t fp32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN
  const uint32_t round = 0x7fffu + ((bits >> 16) & 1u);  // ties to the even upper half
  return static_cast<uint16_t>((bits + round) >> 16);
}

void round_to_bf16(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
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

void dequantize_q5_0(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kQ5_0BlockBytes;
    const float d = load_half(block);
    const uint32_t qh = load_u32(block + 2);
    float* out = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock; ++j) out[j] = d * static_cast<float>(five_bit(block + 6, qh, j) - 16);
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kQ5_1BlockBytes;
    const float d = load_half(block);
    const float m = load_half(block + 2);
    const uint32_t qh = load_u32(block + 4);
    float* out = dst + b * kQuantBlock;
    for (int j = 0; j < kQuantBlock; ++j) out[j] = d * static_cast<float>(five_bit(block + 8, qh, j)) + m;
  }
}

void dequantize_iq4_nl(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = src + b * kIQ4_NLBlockBytes;
    iq4_codes(block + 2, load_half(block), dst + b * kQuantBlock);
  }
}

// Each 128-weight half h uses 32 bytes of qs; its four 32-weight quarters j take bits 2j..2j+1
// of those bytes, and each quarter is two 16-weight sub-blocks with their own scale byte.
void dequantize_q2_k(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantSuperBlock; ++b) {
    const uint8_t* block = src + b * kQ2_KBlockBytes;
    const uint8_t* scales = block;   // [16]
    const uint8_t* qs = block + 16;  // [64]
    const float d = load_half(block + 80);
    const float dmin = load_half(block + 82);
    float* out = dst + b * kQuantSuperBlock;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = qs + 32 * h;
      for (int j = 0; j < 4; ++j) {
        for (int k = 0; k < 2; ++k) {
          const uint8_t sc = scales[8 * h + 2 * j + k];
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          float* o = out + 128 * h + 32 * j + 16 * k;
          for (int l = 0; l < 16; ++l)
            o[l] = dl * static_cast<float>((q[16 * k + l] >> (2 * j)) & 3) - ml;
        }
      }
    }
  }
}

// As Q2_K, with a third quant bit from hmask (bit 4h+j of byte l for weight l of quarter j of
// half h): q = low2 - 4 when that bit is clear, so q is in [-4, 3].
void dequantize_q3_k(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantSuperBlock; ++b) {
    const uint8_t* block = src + b * kQ3_KBlockBytes;
    const uint8_t* hmask = block;        // [32]
    const uint8_t* qs = block + 32;      // [64]
    const uint8_t* scales = block + 96;  // [12]
    const float d = load_half(block + 108);
    float* out = dst + b * kQuantSuperBlock;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = qs + 32 * h;
      for (int j = 0; j < 4; ++j) {
        const int bit = 4 * h + j;
        for (int k = 0; k < 2; ++k) {
          const float dl = d * static_cast<float>(scale_q3_k(scales, 8 * h + 2 * j + k));
          float* o = out + 128 * h + 32 * j + 16 * k;
          for (int l = 16 * k; l < 16 * k + 16; ++l) {
            const int v = ((q[l] >> (2 * j)) & 3) - (((hmask[l] >> bit) & 1) ? 0 : 4);
            o[l - 16 * k] = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

namespace {

// Q4_K and Q5_K: four 64-weight groups g, each 32 bytes of qs: low nibbles are sub-block 2g, high
// nibbles 2g+1. Q5_K adds qh[32] before qs, a fifth quant bit: bit s of qh[l] for weight l of
// sub-block s, so q is in [0, 31].
void dequantize_k4_family(const uint8_t* src, float* dst, std::size_t n, bool fifth_bit) {
  const std::size_t block_bytes = fifth_bit ? kQ5_KBlockBytes : kQ4_KBlockBytes;
  for (std::size_t b = 0; b < n / kQuantSuperBlock; ++b) {
    const uint8_t* block = src + b * block_bytes;
    const float d = load_half(block);
    const float dmin = load_half(block + 2);
    const uint8_t* scales = block + 4;                 // [12]
    const uint8_t* qh = block + 16;                    // [32], Q5_K only
    const uint8_t* qs = block + (fifth_bit ? 48 : 16);  // [128]
    float* out = dst + b * kQuantSuperBlock;
    for (int g = 0; g < 4; ++g) {
      const GroupFactors f = group_factors_k4(scales, g, d, dmin);
      const uint8_t* q = qs + 32 * g;
      float* o = out + 64 * g;
      for (int l = 0; l < 32; ++l) {
        int lo = q[l] & 0x0f, hi = q[l] >> 4;
        if (fifth_bit) {
          lo |= ((qh[l] >> (2 * g)) & 1) << 4;
          hi |= ((qh[l] >> (2 * g + 1)) & 1) << 4;
        }
        o[l] = f.d1 * static_cast<float>(lo) - f.m1;
        o[l + 32] = f.d2 * static_cast<float>(hi) - f.m2;
      }
    }
  }
}

}  // namespace

void k4_sub_block_factors(const uint8_t* block, int j, float& scale, float& min) {
  int sc, m;
  scale_min_k4(block + 4, j, sc, m);
  scale = load_half(block) * static_cast<float>(sc);
  min = load_half(block + 2) * static_cast<float>(m);
}

// Sub-block t covers weights 16t .. 16t+15: half t / 8, quarter (t % 8) / 2, part t % 2 in the
// dequantizers' loops, whose scale index 8h + 2j + k is t again.
void q2_k_sub_block_factors(const uint8_t* block, int t, float& scale, float& min) {
  const uint8_t sc = block[t];
  scale = load_half(block + 80) * static_cast<float>(sc & 0x0f);
  min = load_half(block + 82) * static_cast<float>(sc >> 4);
}

float q3_k_sub_block_scale(const uint8_t* block, int t) {
  return load_half(block + 108) * static_cast<float>(scale_q3_k(block + 96, t));
}

float q6_k_sub_block_scale(const uint8_t* block, int t) {
  return load_half(block + 208) * static_cast<float>(static_cast<int8_t>(block[192 + t]));
}

void dequantize_q4_k(const uint8_t* src, float* dst, std::size_t n) { dequantize_k4_family(src, dst, n, false); }
void dequantize_q5_k(const uint8_t* src, float* dst, std::size_t n) { dequantize_k4_family(src, dst, n, true); }

// Each 128-weight half h uses 64 bytes of ql and 32 of qh. Weight l of its quarter j (l < 32)
// takes four low bits from ql[l] (j = 0), ql[l+32] (j = 1) or their high nibbles (j = 2, 3), and
// two high bits from qh[l] at bit 2j; q = that six-bit value - 32. Scales cover 16 weights.
void dequantize_q6_k(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantSuperBlock; ++b) {
    const uint8_t* block = src + b * kQ6_KBlockBytes;
    const float d = load_half(block + 208);
    float* out = dst + b * kQuantSuperBlock;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = block + 64 * h;        // [64]
      const uint8_t* qh = block + 128 + 32 * h;  // [32]
      const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192 + 8 * h);  // [8]
      float* o = out + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        o[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
        o[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
        o[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
        o[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// Sub-block i (32 weights) of a super-block: scale (low nibble i of scales_l | two bits i of
// scales_h above it) - 32, times d.
float iq4_xs_sub_block_scale(const uint8_t* block, int i) {
  const uint16_t scales_h = load_u16(block + 2);
  const uint8_t* scales_l = block + 4;  // [4]
  const int ls = ((scales_l[i / 2] >> (4 * (i % 2))) & 0x0f) | ((scales_h >> (2 * i)) & 3) << 4;
  return load_half(block) * static_cast<float>(ls - 32);
}

// Sub-block i's codes are qs[16 i .. 16 i + 15], as in IQ4_NL.
void dequantize_iq4_xs(const uint8_t* src, float* dst, std::size_t n) {
  for (std::size_t b = 0; b < n / kQuantSuperBlock; ++b) {
    const uint8_t* block = src + b * kIQ4_XSBlockBytes;
    const uint8_t* qs = block + 8;  // [128]
    for (int i = 0; i < kQuantSuperBlock / kQuantBlock; ++i)
      iq4_codes(qs + 16 * i, iq4_xs_sub_block_scale(block, i), dst + b * kQuantSuperBlock + i * kQuantBlock);
  }
}

}  // namespace kvs
