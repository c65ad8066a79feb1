// Dequantization of F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, the K-quants Q2_K..Q6_K and
// IQ4_XS against hand-computed blocks (the K-quant blocks are packed here weight by weight from the ggml layout),
// directly and through GGUF tensors spanning several rows and work chunks; K-quant rows that are
// not whole super-blocks and truncated K-quant data are one-line input errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

#include "gguf_writer.h"
#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "kernels/quant.h"
#include "quant_blocks.h"

namespace kvs {
namespace {

void put_half(std::vector<uint8_t>& b, uint16_t h) {
  b.push_back(static_cast<uint8_t>(h & 0xff));
  b.push_back(static_cast<uint8_t>(h >> 8));
}

TEST(Quant, HalfAndBfloat) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x0200), std::ldexp(1.0f, -15));  // a subnormal with one bit
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC0A0), -5.0f);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
}

TEST(Quant, Q8_0Block) {
  std::vector<uint8_t> b;
  put_half(b, 0x3800);  // d = 0.5
  for (int j = 0; j < 32; ++j) b.push_back(static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128)));
  float out[32];
  dequantize_q8_0(b.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j * 8 - 128)) << j;
}

TEST(Quant, Q4_0Block) {
  std::vector<uint8_t> b;
  put_half(b, 0x4000);  // d = 2
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  float out[32];
  dequantize_q4_0(b.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8)) << j;       // low nibble = weight j
    EXPECT_EQ(out[j + 16], 2.0f * (7 - j)) << j;  // high nibble = weight j + 16
  }
}

TEST(Quant, Q4_1Block) {
  std::vector<uint8_t> b;
  put_half(b, 0x3400);  // d = 0.25
  put_half(b, 0xBC00);  // m = -1
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(((j * 3) % 16) | (j << 4)));
  float out[32];
  dequantize_q4_1(b.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * ((j * 3) % 16) - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.25f * j - 1.0f) << j;
  }
}

// Five-bit weights w_j = j (j < 32, so the fifth bit is set for j >= 16): low nibbles in qs, the
// fifth bits little-endian in qh.
std::vector<uint8_t> five_bit_codes() {
  std::vector<uint8_t> b;
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((j >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) b.push_back(static_cast<uint8_t>(qh >> (8 * k)));
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>((j & 15) | ((j + 16) & 15) << 4));
  return b;
}

TEST(Quant, Q5_0Block) {
  std::vector<uint8_t> b;
  put_half(b, 0x3800);  // d = 0.5
  const std::vector<uint8_t> codes = five_bit_codes();
  b.insert(b.end(), codes.begin(), codes.end());
  ASSERT_EQ(b.size(), kQ5_0BlockBytes);
  float out[32];
  dequantize_q5_0(b.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
}

TEST(Quant, Q5_1Block) {
  std::vector<uint8_t> b;
  put_half(b, 0x3400);  // d = 0.25
  put_half(b, 0xC000);  // m = -2
  const std::vector<uint8_t> codes = five_bit_codes();
  b.insert(b.end(), codes.begin(), codes.end());
  ASSERT_EQ(b.size(), kQ5_1BlockBytes);
  float out[32];
  dequantize_q5_1(b.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.25f * j - 2.0f) << j;
}

// IQ4_NL / IQ4_XS code c stands for level[c] (ggml's kvalues_iq4nl).
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

TEST(Quant, IQ4_NLBlock) {
  std::vector<uint8_t> b;
  put_half(b, 0x2C00);  // d = 1/16
  // weight j < 16 code j, weight j + 16 code 15 - j
  for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  ASSERT_EQ(b.size(), kIQ4_NLBlockBytes);
  float out[32];
  dequantize_iq4_nl(b.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], kLevels[j] / 16.0f) << j;
    EXPECT_EQ(out[j + 16], kLevels[15 - j] / 16.0f) << j;
  }
}

// Sub-block i of the super-block gets the six-bit scale 5 i + 20 (low four bits in scales_l's
// nibble i, high two in scales_h's bits 2i..2i+1), so d * (scale - 32) runs from -12 d to +23 d;
// weight j of every sub-block has code (j + i) % 16.
TEST(Quant, IQ4_XSBlock) {
  std::vector<uint8_t> b;
  put_half(b, 0x3000);  // d = 1/8
  uint16_t scales_h = 0;
  uint8_t scales_l[4] = {};
  for (int i = 0; i < 8; ++i) {
    const int sc = 5 * i + 20;
    scales_l[i / 2] = static_cast<uint8_t>(scales_l[i / 2] | (sc & 15) << (4 * (i % 2)));
    scales_h = static_cast<uint16_t>(scales_h | (sc >> 4) << (2 * i));
  }
  put_half(b, scales_h);
  b.insert(b.end(), scales_l, scales_l + 4);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j) b.push_back(static_cast<uint8_t>((j + i) % 16 | ((j + 16 + i) % 16) << 4));
  ASSERT_EQ(b.size(), kIQ4_XSBlockBytes);
  float out[256];
  dequantize_iq4_xs(b.data(), out, 256);
  for (int i = 0; i < 8; ++i) {
    const float dl = 0.125f * static_cast<float>(5 * i + 20 - 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(out[32 * i + j], dl * kLevels[(j + i) % 16]) << i << " " << j;
  }
}

// Types a file may hold that KVScope does not decode are named in its errors, newer ones included.
TEST(Quant, UnsupportedTypesAreNamed) {
  EXPECT_FALSE(ggml_type_supported(15));
  EXPECT_EQ(ggml_type_name(15), "Q8_K");
  EXPECT_EQ(ggml_type_name(16), "IQ2_XXS");
  EXPECT_EQ(ggml_type_name(34), "TQ1_0");
  EXPECT_EQ(ggml_type_name(39), "MXFP4");
  EXPECT_FALSE(ggml_type_supported(39));
  EXPECT_EQ(ggml_type_name(40), "type 40");
  for (uint32_t t : {kGgmlQ5_0, kGgmlQ5_1, kGgmlIQ4_NL, kGgmlIQ4_XS}) EXPECT_TRUE(ggml_type_supported(t)) << t;
  EXPECT_EQ(ggml_type_name(kGgmlIQ4_XS), "IQ4_XS");
}

// Builds `rows` rows of 64 weights (2 blocks each) in `type`; block k of the tensor has scale
// (k+1)/8 and quant values chosen so weight i of the block is ((i % 16) - 8) * scale (+ min).
TEST(Quant, MultiRowTensorsThroughGguf) {
  const int rows = 130;  // more than one 64-row work chunk
  const int blocks = rows * 2;
  auto scale_bits = [](int k) {
    // (k+1)/8 as fp16: exactly representable for k < 2048.
    const float v = (k + 1) / 8.0f;
    int e = 0;
    const float m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
    const uint16_t mant = static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024));
    return static_cast<uint16_t>(((e - 1 + 15) << 10) | mant);
  };
  std::vector<uint8_t> q8, q4_0, q4_1;
  for (int k = 0; k < blocks; ++k) {
    put_half(q8, scale_bits(k));
    for (int i = 0; i < 32; ++i)
      q8.push_back(static_cast<uint8_t>(static_cast<int8_t>(i % 16 - 8)));
    put_half(q4_0, scale_bits(k));
    put_half(q4_1, scale_bits(k));
    put_half(q4_1, 0x3C00);  // m = 1
    for (int j = 0; j < 16; ++j) {
      q4_0.push_back(static_cast<uint8_t>(j | (j << 4)));
      q4_1.push_back(static_cast<uint8_t>(j | (j << 4)));
    }
  }
  testing::TempDir dir;
  testing::GgufWriter w;
  w.add_tensor("a", {64, rows}, kGgmlQ8_0, q8);
  w.add_tensor("b", {64, rows}, kGgmlQ4_0, q4_0);
  w.add_tensor("c", {64, rows}, kGgmlQ4_1, q4_1);
  const std::string path = dir.file("q.gguf");
  w.write(path);
  GgufFile g(path);
  const std::vector<float> a = g.read_f32(*g.find_tensor("a"));
  const std::vector<float> b = g.read_f32(*g.find_tensor("b"));
  const std::vector<float> c = g.read_f32(*g.find_tensor("c"));
  ASSERT_EQ(a.size(), 64u * rows);
  for (int k = 0; k < blocks; ++k) {
    const float d = (k + 1) / 8.0f;
    for (int i = 0; i < 32; ++i) {
      const float expect = d * (i % 16 - 8);
      EXPECT_EQ(a[k * 32 + i], expect);
      EXPECT_EQ(b[k * 32 + i], expect);
      EXPECT_EQ(c[k * 32 + i], d * (i % 16) + 1.0f);
    }
  }
}

// ---- K-quants. Each test packs one super-block from chosen quants q[256] and sub-block scales,
// with power-of-two fp16 factors so that every expected value is exact.

// Quant of weight w used by the K-quant tests: a spread of values in [0, range).
int test_quant(int w, int range) { return (w * 7 + w / 16 * 3 + 1) % range; }

// Packs 8 six-bit scales and 8 six-bit mins into the 12 bytes of Q4_K / Q5_K: bytes 0-3 scales
// 0-3, bytes 4-7 mins 0-3, bytes 8-11 the low nibbles of scale / min 4-7, whose top two bits go
// to bits 6-7 of bytes 0-3 (scales) and 4-7 (mins).
std::array<uint8_t, 12> pack_scale_min_k4(const int (&sc)[8], const int (&m)[8]) {
  std::array<uint8_t, 12> b{};
  for (int j = 0; j < 4; ++j) {
    b[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    b[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    b[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | (m[j + 4] & 0x0f) << 4);
  }
  return b;
}

const int kSc[8] = {1, 63, 17, 32, 5, 48, 0, 33};
const int kMin[8] = {63, 0, 9, 40, 16, 1, 31, 50};

TEST(Quant, Q4_KBlock) {
  std::vector<uint8_t> b;
  put_half(b, 0x3800);  // d = 0.5
  put_half(b, 0x3400);  // dmin = 0.25
  const auto scales = pack_scale_min_k4(kSc, kMin);
  b.insert(b.end(), scales.begin(), scales.end());
  uint8_t qs[128] = {};
  for (int w = 0; w < 256; ++w) {
    // 64-weight group g: weights 0-31 in the low nibbles of its 32 bytes, 32-63 in the high ones.
    const int g = w / 64, r = w % 64;
    qs[32 * g + r % 32] |= static_cast<uint8_t>(test_quant(w, 16) << (r < 32 ? 0 : 4));
  }
  b.insert(b.end(), qs, qs + 128);
  ASSERT_EQ(b.size(), kQ4_KBlockBytes);
  float out[256];
  dequantize_q4_k(b.data(), out, 256);
  for (int w = 0; w < 256; ++w)
    EXPECT_EQ(out[w], 0.5f * kSc[w / 32] * test_quant(w, 16) - 0.25f * kMin[w / 32]) << w;
}

TEST(Quant, Q5_KBlock) {
  std::vector<uint8_t> b;
  put_half(b, 0x3C00);  // d = 1
  put_half(b, 0x4000);  // dmin = 2
  const auto scales = pack_scale_min_k4(kSc, kMin);
  b.insert(b.end(), scales.begin(), scales.end());
  uint8_t qh[32] = {}, qs[128] = {};
  for (int w = 0; w < 256; ++w) {
    const int q = test_quant(w, 32);
    const int g = w / 64, r = w % 64;
    qs[32 * g + r % 32] |= static_cast<uint8_t>((q & 0x0f) << (r < 32 ? 0 : 4));
    qh[w % 32] |= static_cast<uint8_t>((q >> 4) << (w / 32));  // bit s for sub-block s
  }
  b.insert(b.end(), qh, qh + 32);
  b.insert(b.end(), qs, qs + 128);
  ASSERT_EQ(b.size(), kQ5_KBlockBytes);
  float out[256];
  dequantize_q5_k(b.data(), out, 256);
  for (int w = 0; w < 256; ++w)
    EXPECT_EQ(out[w], 1.0f * kSc[w / 32] * test_quant(w, 32) - 2.0f * kMin[w / 32]) << w;
}

TEST(Quant, Q6_KBlock) {
  const int8_t sc[16] = {1, -1, 127, -128, 2, 3, -7, 64, 0, 5, -33, 100, 9, -2, 11, 45};
  uint8_t ql[128] = {}, qh[64] = {};
  for (int w = 0; w < 256; ++w) {
    const int q = test_quant(w, 64);  // stored value; the weight is (q - 32) * d * scale
    // 128-weight half h, 32-weight quarter j, position l: low four bits in ql[64h + l] (j = 0),
    // ql[64h + 32 + l] (j = 1) or the high nibbles of those (j = 2, 3); top two bits in
    // qh[32h + l] at bit 2j.
    const int h = w / 128, j = w % 128 / 32, l = w % 32;
    ql[64 * h + 32 * (j % 2) + l] |= static_cast<uint8_t>((q & 0x0f) << (j < 2 ? 0 : 4));
    qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * j));
  }
  std::vector<uint8_t> b(ql, ql + 128);
  b.insert(b.end(), qh, qh + 64);
  for (int8_t v : sc) b.push_back(static_cast<uint8_t>(v));
  put_half(b, 0x3000);  // d = 0.125
  ASSERT_EQ(b.size(), kQ6_KBlockBytes);
  float out[256];
  dequantize_q6_k(b.data(), out, 256);
  for (int w = 0; w < 256; ++w)
    EXPECT_EQ(out[w], 0.125f * sc[w / 16] * (test_quant(w, 64) - 32)) << w;
}

TEST(Quant, Q2_KBlock) {
  uint8_t scales[16], qs[64] = {};
  for (int s = 0; s < 16; ++s) scales[s] = static_cast<uint8_t>((s * 5 + 2) % 16 | (15 - s) << 4);
  for (int w = 0; w < 256; ++w) {
    // 128-weight half h, quarter j, position l: bits 2j..2j+1 of qs[32h + l].
    const int h = w / 128, j = w % 128 / 32, l = w % 32;
    qs[32 * h + l] |= static_cast<uint8_t>(test_quant(w, 4) << (2 * j));
  }
  std::vector<uint8_t> b(scales, scales + 16);
  b.insert(b.end(), qs, qs + 64);
  put_half(b, 0x4400);  // d = 4
  put_half(b, 0x3800);  // dmin = 0.5
  ASSERT_EQ(b.size(), kQ2_KBlockBytes);
  float out[256];
  dequantize_q2_k(b.data(), out, 256);
  for (int w = 0; w < 256; ++w) {
    const int s = w / 16;
    EXPECT_EQ(out[w], 4.0f * ((s * 5 + 2) % 16) * test_quant(w, 4) - 0.5f * (15 - s)) << w;
  }
}

TEST(Quant, Q3_KBlock) {
  const int sc[16] = {-32, 31, 0, 1, -1, 17, -20, 5, 30, -31, 8, -8, 3, 12, -16, 25};
  uint8_t hmask[32] = {}, qs[64] = {}, scales[12] = {};
  for (int s = 0; s < 16; ++s) {
    // Six-bit value sc + 32: low nibble in byte s (s < 8) or the high nibble of byte s - 8, top
    // two bits in byte 8 + s%4 at bit 2*(s/4).
    const int u = sc[s] + 32;
    scales[s % 8] |= static_cast<uint8_t>((u & 0x0f) << (s < 8 ? 0 : 4));
    scales[8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
  }
  for (int w = 0; w < 256; ++w) {
    const int q = test_quant(w, 8) - 4;  // in [-4, 3]: low two bits, hmask bit set when q >= 0
    const int h = w / 128, j = w % 128 / 32, l = w % 32;
    qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * j));
    if (q >= 0) hmask[l] |= static_cast<uint8_t>(1 << (4 * h + j));
  }
  std::vector<uint8_t> b(hmask, hmask + 32);
  b.insert(b.end(), qs, qs + 64);
  b.insert(b.end(), scales, scales + 12);
  put_half(b, 0x3C00);  // d = 1
  ASSERT_EQ(b.size(), kQ3_KBlockBytes);
  float out[256];
  dequantize_q3_k(b.data(), out, 256);
  for (int w = 0; w < 256; ++w) EXPECT_EQ(out[w], 1.0f * sc[w / 16] * (test_quant(w, 8) - 4)) << w;
}

// Every K-quant tensor of 130 rows of 512 weights (2 super-blocks each; 66560 weights, two work
// chunks) reads as its blocks decoded one by one.
TEST(Quant, KQuantTensorsThroughGguf) {
  const uint64_t cols = 512, rows = 130;
  std::mt19937 rng(5);
  testing::TempDir dir;
  testing::GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  for (const testing::BlockFormat& f : testing::kquant_formats()) {
    data.push_back(testing::random_blocks(f, cols * rows / 256, rng, 20));
    w.add_tensor(f.name, {cols, rows}, f.type, data.back());
  }
  const std::string path = dir.file("k.gguf");
  w.write(path);
  GgufFile g(path);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const testing::BlockFormat& f = testing::kquant_formats()[i];
    const std::vector<float> got = g.read_f32(*g.find_tensor(f.name));
    ASSERT_EQ(got.size(), cols * rows) << f.name;
    for (uint64_t k = 0; k < cols * rows / 256; ++k) {
      float expect[256];
      f.dequantize(data[i].data() + k * f.block_bytes, expect, 256);
      for (int j = 0; j < 256; ++j) ASSERT_EQ(got[k * 256 + j], expect[j]) << f.name << " " << k;
    }
  }
}

TEST(Quant, KQuantRowsMustBeWholeSuperBlocks) {
  testing::TempDir dir;
  testing::GgufWriter w;
  w.add_tensor("odd", {320, 4}, kGgmlQ5_K, std::vector<uint8_t>(5 * kQ5_KBlockBytes, 0));
  const std::string path = dir.file("odd.gguf");
  w.write(path);
  GgufFile g(path);
  EXPECT_EQ(testing::input_error_of([&] { g.read_f32(*g.find_tensor("odd")); }),
            path + ": tensor odd has rows of 320 weights, not a multiple of the Q5_K block of 256 "
                   "weights");
}

TEST(Quant, TruncatedKQuantDataIsNamed) {
  testing::TempDir dir;
  testing::GgufWriter w;
  // 2 rows of 256 weights need 2 blocks; the file holds one and a half.
  w.add_tensor("short", {256, 2}, kGgmlQ6_K, std::vector<uint8_t>(kQ6_KBlockBytes * 3 / 2, 0));
  const std::string path = dir.file("short.gguf");
  w.write(path);
  const std::size_t size = testing::read_bytes(path).size();
  EXPECT_EQ(testing::input_error_of([&] { GgufFile g(path); }),
            path + ": truncated file (tensor short ends past " + std::to_string(size) + " bytes)");
}

}  // namespace
}  // namespace kvs
