// Quantized panels (kernels/quant_panels.h) against the fp32 path: for every GGML format they
// keep, random blocks packed both ways give the same rows and the same prefill products bit for
// bit, and the same decode products to a rounding per term (a block with d = -0 and the rows
// padding the last panel included); a block whose factor is not finite is refused. fp16 and bf16
// panels likewise, for any number of columns; rows moved as stored keep their weights; panels
// scaled by a multiplier, or carrying one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_panels.h"
#include "quant_blocks.h"

namespace kvs {
namespace {

using testing::BlockFormat;

struct Case {
  BlockFormat format;
  ops::QuantFormat quant;
};

std::vector<Case> cases() {
  return {{{"Q8_0", kGgmlQ8_0, kQ8_0BlockBytes, {0}, dequantize_q8_0, kQuantBlock}, ops::QuantFormat::Q8_0},
          {{"Q4_0", kGgmlQ4_0, kQ4_0BlockBytes, {0}, dequantize_q4_0, kQuantBlock}, ops::QuantFormat::Q4_0},
          {{"Q4_1", kGgmlQ4_1, kQ4_1BlockBytes, {0, 2}, dequantize_q4_1, kQuantBlock}, ops::QuantFormat::Q4_1},
          {{"Q5_0", kGgmlQ5_0, kQ5_0BlockBytes, {0}, dequantize_q5_0, kQuantBlock}, ops::QuantFormat::Q5_0},
          {{"Q5_1", kGgmlQ5_1, kQ5_1BlockBytes, {0, 2}, dequantize_q5_1, kQuantBlock}, ops::QuantFormat::Q5_1},
          {{"Q4_K", kGgmlQ4_K, kQ4_KBlockBytes, {0, 2}, dequantize_q4_k}, ops::QuantFormat::Q4_K},
          {{"Q5_K", kGgmlQ5_K, kQ5_KBlockBytes, {0, 2}, dequantize_q5_k}, ops::QuantFormat::Q5_K},
          {{"Q2_K", kGgmlQ2_K, kQ2_KBlockBytes, {80, 82}, dequantize_q2_k}, ops::QuantFormat::Q2_K},
          {{"Q3_K", kGgmlQ3_K, kQ3_KBlockBytes, {108}, dequantize_q3_k}, ops::QuantFormat::Q3_K},
          {{"Q6_K", kGgmlQ6_K, kQ6_KBlockBytes, {208}, dequantize_q6_k}, ops::QuantFormat::Q6_K},
          {{"IQ4_NL", kGgmlIQ4_NL, kIQ4_NLBlockBytes, {0}, dequantize_iq4_nl, kQuantBlock}, ops::QuantFormat::IQ4_NL},
          {{"IQ4_XS", kGgmlIQ4_XS, kIQ4_XSBlockBytes, {0}, dequantize_iq4_xs}, ops::QuantFormat::IQ4_XS}};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Panels q of W[rows, cols] (fp32 weights w, their fp32 panels f32) against the fp32 panels, over
// the tokens x [x.size() / cols, cols]: rows and prefill products bit for bit; decode products
// within 1e-6 of sum |w x| (the multiply-adds may be fused in one loop and not in the other,
// quant_panel_dot: each term then rounds once more, ~6e-8 of it).
void expect_same_as_fp32(ops::QuantPanels q, const std::vector<float>& f32, const std::vector<float>& w,
                         const std::vector<float>& x, int rows, int cols) {
  const int tokens = static_cast<int>(x.size() / cols);
  std::vector<float> row(cols), want(cols);
  for (int r : {0, 17, rows - 1}) {
    ops::quant_row(row.data(), q, cols, r);
    want.assign(w.begin() + static_cast<long>(r) * cols, w.begin() + static_cast<long>(r + 1) * cols);
    EXPECT_TRUE(same_bits(row, want)) << "row " << r;
  }
  std::vector<float> y_f32(rows), y_q(rows);
  ops::matvec_packed(y_f32.data(), f32.data(), x.data(), rows, cols);
  ops::matvec_packed(y_q.data(), q, x.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    double magnitude = 0.0;  // sum |w x| of row r
    for (int k = 0; k < cols; ++k) magnitude += std::abs(double{w[static_cast<long>(r) * cols + k]} * x[k]);
    EXPECT_NEAR(y_q[r], y_f32[r], 1e-6 * magnitude) << "row " << r;
  }
  std::vector<float> m_f32(static_cast<std::size_t>(tokens) * rows), m_q(m_f32.size());
  ops::matmul_packed(m_f32.data(), x.data(), f32.data(), tokens, rows, cols);
  ops::matmul_packed(m_q.data(), x.data(), q, tokens, rows, cols);
  EXPECT_TRUE(same_bits(m_f32, m_q));
}

TEST(QuantPanels, ProductsAndRowsEqualTheFp32PanelsBitForBit) {
  constexpr int rows = 45, cols = 512, tokens = 13;  // rows: one panel and part of another
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(tokens) * cols);
  for (float& v : x) v = value(rng);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.format.name);
    const std::size_t n_blocks = static_cast<std::size_t>(rows) * cols / c.format.weights;
    std::vector<uint8_t> blocks = testing::random_blocks(c.format, n_blocks, rng, 20);
    const std::size_t d = 3 * c.format.block_bytes + c.format.half_offsets[0];
    blocks[d] = 0x00, blocks[d + 1] = 0x80;  // block 3's d = -0
    std::vector<float> w(static_cast<std::size_t>(rows) * cols);  // [rows, cols]
    c.format.dequantize(blocks.data(), w.data(), w.size());
    std::vector<float> f32(ops::packed_floats(rows, cols));
    ops::pack_panels(f32.data(), w.data(), rows, cols);
    const ops::QuantKind kind = ops::quant_kind(c.quant);
    std::vector<uint8_t> bytes(ops::quant_bytes(kind, rows, cols));
    ASSERT_TRUE(ops::pack_quant_panels(bytes.data(), c.quant, blocks.data(), w.data(), rows, cols));
    EXPECT_LT(bytes.size(), f32.size() * sizeof(float) / 3);
    expect_same_as_fp32({kind, bytes.data()}, f32, w, x, rows, cols);
  }
}

// Random 16-bit floats [n] (little-endian bytes) over the whole finite range of magnitudes near
// 1, with subnormals and both zeros among them.
std::vector<uint8_t> random_16bit(ops::QuantFormat f, std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<uint8_t> out(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    float v = value(rng);
    if (i % 97 == 5) v = f == ops::QuantFormat::F16 ? 3e-6f : 1e-39f;  // subnormal in the format
    if (i % 89 == 7) v = i % 2 ? 0.0f : -0.0f;
    const uint16_t h = f == ops::QuantFormat::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
    out[2 * i] = static_cast<uint8_t>(h & 0xff), out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return out;
}

TEST(QuantPanels, SixteenBitPanelsEqualTheFp32PanelsForAnyColumnCount) {
  constexpr int rows = 45, tokens = 13;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (const ops::QuantFormat f : {ops::QuantFormat::F16, ops::QuantFormat::BF16}) {
    for (const int cols : {77, 64, 1}) {  // odd: the last column joins the even chain
      SCOPED_TRACE(std::string(f == ops::QuantFormat::F16 ? "F16" : "BF16") + " cols " + std::to_string(cols));
      std::vector<float> x(static_cast<std::size_t>(tokens) * cols);
      for (float& v : x) v = value(rng);
      const std::vector<uint8_t> values = random_16bit(f, static_cast<std::size_t>(rows) * cols, rng);
      std::vector<float> w(static_cast<std::size_t>(rows) * cols);  // [rows, cols]
      if (f == ops::QuantFormat::F16) dequantize_f16(values.data(), w.data(), w.size());
      else dequantize_bf16(values.data(), w.data(), w.size());
      std::vector<float> f32(ops::packed_floats(rows, cols));
      ops::pack_panels(f32.data(), w.data(), rows, cols);
      const ops::QuantKind kind = ops::quant_kind(f);
      std::vector<uint8_t> bytes(ops::quant_bytes(kind, rows, cols));
      EXPECT_EQ(bytes.size(), f32.size() * sizeof(float) / 2);
      ASSERT_TRUE(ops::pack_quant_panels(bytes.data(), f, values.data(), w.data(), rows, cols));
      expect_same_as_fp32({kind, bytes.data()}, f32, w, x, rows, cols);
      ASSERT_TRUE(ops::quant_exact(f));  // so the loaders pack them without their fp32 weights
      std::vector<uint8_t> unchecked(bytes.size());
      ASSERT_TRUE(ops::pack_quant_panels(unchecked.data(), f, values.data(), nullptr, rows, cols));
      EXPECT_EQ(unchecked, bytes);
    }
  }
}

// Every kept kind, rows permuted as stored (quant_copy_row) across panels and within them: each
// row then expands to the weights of the row it came from.
TEST(QuantPanels, RowsMoveWithTheirFactors) {
  constexpr int rows = 45, cols = 256;
  std::mt19937 rng(5);
  std::vector<int> order(rows);
  for (int r = 0; r < rows; ++r) order[r] = r;
  std::shuffle(order.begin(), order.end(), rng);
  const std::vector<Case> block_cases = cases();
  std::vector<std::pair<std::string, ops::QuantFormat>> kinds;
  for (const Case& c : block_cases) kinds.emplace_back(c.format.name, c.quant);
  kinds.emplace_back("F16", ops::QuantFormat::F16);
  kinds.emplace_back("BF16", ops::QuantFormat::BF16);
  for (const auto& [name, format_of_case] : kinds) {
    SCOPED_TRACE(name);
    const ops::QuantFormat f = format_of_case;  // a plain variable: lambdas may capture it
    std::vector<uint8_t> encoded;
    std::vector<float> w(static_cast<std::size_t>(rows) * cols);  // [rows, cols]
    if (f == ops::QuantFormat::F16 || f == ops::QuantFormat::BF16) {
      encoded = random_16bit(f, w.size(), rng);
      if (f == ops::QuantFormat::F16) dequantize_f16(encoded.data(), w.data(), w.size());
      else dequantize_bf16(encoded.data(), w.data(), w.size());
    } else {
      const BlockFormat& format =
          std::find_if(block_cases.begin(), block_cases.end(), [&](const Case& c) { return c.quant == f; })->format;
      encoded = testing::random_blocks(format, w.size() / format.weights, rng, 20);
      format.dequantize(encoded.data(), w.data(), w.size());
    }
    const ops::QuantKind kind = ops::quant_kind(f);
    std::vector<uint8_t> bytes(ops::quant_bytes(kind, rows, cols));
    ASSERT_TRUE(ops::pack_quant_panels(bytes.data(), f, encoded.data(), w.data(), rows, cols));
    std::vector<uint8_t> moved = bytes;
    for (int r = 0; r < rows; ++r) ops::quant_copy_row(moved.data(), r, bytes.data(), order[r], kind, cols);
    std::vector<float> row(cols), want(cols);
    for (int r = 0; r < rows; ++r) {
      ops::quant_row(row.data(), {kind, moved.data()}, cols, r);
      want.assign(w.begin() + static_cast<long>(order[r]) * cols, w.begin() + static_cast<long>(order[r] + 1) * cols);
      ASSERT_TRUE(same_bits(row, want)) << "row " << r << " from " << order[r];
    }
  }
}

// quant_scale: a block kind's weights within a rounding or two of w f; a 16-bit kind's exactly by
// a power of two, and refused (its bytes as they were) by a factor that leaves the format, which
// QuantPanels::scale then carries.
TEST(QuantPanels, ScaledByAMultiplier) {
  constexpr int rows = 45, cols = 256;
  constexpr float f = 0.22f;
  std::mt19937 rng(9);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.format.name);
    const std::vector<uint8_t> blocks = testing::random_blocks(c.format, rows * cols / c.format.weights, rng, 20);
    std::vector<float> w(static_cast<std::size_t>(rows) * cols);  // [rows, cols]
    c.format.dequantize(blocks.data(), w.data(), w.size());
    const ops::QuantKind kind = ops::quant_kind(c.quant);
    std::vector<uint8_t> bytes(ops::quant_bytes(kind, rows, cols));
    ASSERT_TRUE(ops::pack_quant_panels(bytes.data(), c.quant, blocks.data(), w.data(), rows, cols));
    ASSERT_TRUE(ops::quant_scale(bytes.data(), kind, rows, cols, f));
    float largest = 0.0f;
    for (float v : w) largest = std::max(largest, std::abs(v));
    std::vector<float> row(cols);
    for (int r = 0; r < rows; ++r) {
      ops::quant_row(row.data(), {kind, bytes.data()}, cols, r);
      for (int k = 0; k < cols; ++k)
        ASSERT_NEAR(row[k], w[static_cast<std::size_t>(r) * cols + k] * f, 4e-7f * largest * f) << r << ", " << k;
    }
  }
  for (const ops::QuantFormat format : {ops::QuantFormat::F16, ops::QuantFormat::BF16}) {
    const std::vector<uint8_t> values = random_16bit(format, static_cast<std::size_t>(rows) * cols, rng);
    std::vector<float> w(static_cast<std::size_t>(rows) * cols);  // [rows, cols]
    if (format == ops::QuantFormat::F16) dequantize_f16(values.data(), w.data(), w.size());
    else dequantize_bf16(values.data(), w.data(), w.size());
    const ops::QuantKind kind = ops::quant_kind(format);
    std::vector<uint8_t> bytes(ops::quant_bytes(kind, rows, cols));
    ASSERT_TRUE(ops::pack_quant_panels(bytes.data(), format, values.data(), nullptr, rows, cols));
    const std::vector<uint8_t> before = bytes;
    EXPECT_FALSE(ops::quant_scale(bytes.data(), kind, rows, cols, f));
    EXPECT_EQ(bytes, before);
    // Refused, f rides with the panels instead (QuantPanels::scale): rows and prefill products
    // are the fp32 fold's bit for bit, decode's within a rounding.
    std::vector<float> folded = w;  // [rows, cols] the fp32 weights times f
    for (float& v : folded) v *= f;
    std::vector<float> f32(ops::packed_floats(rows, cols));
    ops::pack_panels(f32.data(), folded.data(), rows, cols);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(5) * cols);  // [5 tokens, cols]
    for (float& v : x) v = value(rng);
    expect_same_as_fp32({kind, bytes.data(), f}, f32, folded, x, rows, cols);
    ASSERT_TRUE(ops::quant_scale(bytes.data(), kind, rows, cols, 4.0f));  // subnormals stay exact
    std::vector<float> row(cols);
    for (int r = 0; r < rows; ++r) {
      ops::quant_row(row.data(), {kind, bytes.data()}, cols, r);
      for (int k = 0; k < cols; ++k) ASSERT_EQ(row[k], w[static_cast<std::size_t>(r) * cols + k] * 4.0f) << r;
    }
  }
}

TEST(QuantPanels, ABlockWithANonFiniteFactorIsRefused) {
  const Case c = cases()[0];  // Q8_0
  constexpr int rows = 4, cols = 64;
  std::mt19937 rng(3);
  std::vector<uint8_t> blocks = testing::random_blocks(c.format, rows * cols / kQuantBlock, rng, 20);
  blocks[0] = 0x00, blocks[1] = 0x7c;  // d = +inf
  std::vector<float> w(rows * cols);
  dequantize_q8_0(blocks.data(), w.data(), w.size());
  std::vector<uint8_t> bytes(ops::quant_bytes(ops::quant_kind(c.quant), rows, cols));
  EXPECT_FALSE(ops::pack_quant_panels(bytes.data(), c.quant, blocks.data(), w.data(), rows, cols));
}

}  // namespace
}  // namespace kvs
