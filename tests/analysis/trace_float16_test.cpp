// The float -> half conversion (kernels/quant.h; the trace writer's and the fp16 cache's): exact
// round trip of every half value, round to nearest even (checked against the CPU's F16C
// instruction when available), subnormals, overflow, NaN. Likewise float -> bfloat16 (the bf16
// cache's reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "analysis/float16.h"
#include "kernels/quant.h"

namespace kvs {
namespace {

TEST(Float16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = fp16_to_fp32((uint16_t)h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

TEST(Bfloat16, EveryBfloatRoundTripsAndFloatsRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << h;
  }
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80) << "tie rounds to even (down)";
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82) << "tie rounds to even (up)";
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81) << "past the tie";
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80) << "rounds past the largest bf16 to inf";
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(fp32_to_bf16(70000.0f), 0x4789) << "past fp16's range, within bf16's";
  std::vector<float> x = {1.0f + std::ldexp(1.0f, -9), -3.3f, 0.0f};
  round_to_bf16(x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{1.0f, -3.296875f, 0.0f}));
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00) << "halfway past the largest half rounds to inf";
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001) << "smallest subnormal";
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000) << "tie rounds to even (zero)";
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00) << "tie rounds to even";
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02) << "tie rounds to even (up)";
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(std::nanf("")))));
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
}

#if defined(__F16C__)
TEST(Float16, MatchesF16cOnRandomFloats) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t x = bits(rng);
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) << std::hex << x;
  }
}
#endif

// The trace writer's buffer conversion (eight at a time with F16C when built for it) gives the
// scalar conversion's bits for every input, NaNs included, at every length (vector body + tail).
TEST(Float16, BufferConversionMatchesScalar) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> in(100003);
  for (float& f : in) {
    const uint32_t x = bits(rng);
    std::memcpy(&f, &x, 4);
  }
  const float edge[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                        std::ldexp(1.5f, -25), std::numeric_limits<float>::infinity(), std::nanf(""),
                        -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  std::copy(std::begin(edge), std::end(edge), in.begin() + 5);
  for (size_t n : {in.size(), size_t{7}, size_t{8}, size_t{13}}) {
    std::vector<uint16_t> out(n);
    floats_to_halves({in.data(), n}, out.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], fp32_to_fp16(in[i])) << "element " << i << " of " << n;
  }
}

// ... and the reader's: every half to the scalar conversion's bits; NaNs stay NaNs (F16C sets the
// quiet bit of a signaling one, the scalar conversion keeps it clear).
TEST(Float16, BufferToFloatsMatchesScalarForEveryHalf) {
  std::vector<uint16_t> in(0x10000 + 5);  // + a tail past the vector body
  for (size_t i = 0; i < in.size(); ++i) in[i] = (uint16_t)i;
  std::vector<float> out(in.size());
  halves_to_floats(in, out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = fp16_to_fp32(in[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[i])) << std::hex << in[i];
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &out[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << std::hex << in[i];
  }
}

}  // namespace
}  // namespace kvs
