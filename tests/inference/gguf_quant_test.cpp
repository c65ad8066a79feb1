// Dequantization of F16, BF16, Q8_0, Q4_0 and Q4_1 against hand-computed blocks, directly and
// through a GGUF tensor spanning several rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gguf_writer.h"
#include "inference/gguf_file.h"
#include "kernels/quant.h"

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

}  // namespace
}  // namespace kvs
