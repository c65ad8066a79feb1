// A GGUF model whose matrices are quantized runs as its fp32 twin: the same random blocks
// written once in their formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_XS, F16) and
// once as the dequantizer's fp32 values load to matrices kept in their formats
// (kernels/quant_panels.h), and give the same logits through prefill (bit for
// bit) and the same tokens and logits (to rounding: quant_panel_dot) through greedy decode; so
// does a phi3 model whose stacked q/k/v and gate/up tensors are quantized, with q/k rows permuted
// for partial rotation or not; and a granite model whose multipliers scale its blocks' factors,
// to a rounding.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "inference/loader.h"
#include "loader_test_util.h"
#include "quant_blocks.h"
#include "twin_decoding.h"

namespace kvs {
namespace {

using testing::BlockFormat;
using testing::TempDir;

const std::vector<BlockFormat>& formats() {
  static const std::vector<BlockFormat> f = {
      {"Q8_0", kGgmlQ8_0, kQ8_0BlockBytes, {0}, dequantize_q8_0, kQuantBlock},
      {"Q4_0", kGgmlQ4_0, kQ4_0BlockBytes, {0}, dequantize_q4_0, kQuantBlock},
      {"Q4_1", kGgmlQ4_1, kQ4_1BlockBytes, {0, 2}, dequantize_q4_1, kQuantBlock},
      {"Q5_0", kGgmlQ5_0, kQ5_0BlockBytes, {0}, dequantize_q5_0, kQuantBlock},
      {"Q5_1", kGgmlQ5_1, kQ5_1BlockBytes, {0, 2}, dequantize_q5_1, kQuantBlock},
      {"Q4_K", kGgmlQ4_K, kQ4_KBlockBytes, {0, 2}, dequantize_q4_k},
      {"Q5_K", kGgmlQ5_K, kQ5_KBlockBytes, {0, 2}, dequantize_q5_k},
      {"Q6_K", kGgmlQ6_K, kQ6_KBlockBytes, {208}, dequantize_q6_k},
      {"Q2_K", kGgmlQ2_K, kQ2_KBlockBytes, {80, 82}, dequantize_q2_k},
      {"Q3_K", kGgmlQ3_K, kQ3_KBlockBytes, {108}, dequantize_q3_k},
      {"IQ4_XS", kGgmlIQ4_XS, kIQ4_XSBlockBytes, {0}, dequantize_iq4_xs},
      {"F16", kGgmlF16, 2, {0}, dequantize_f16, 1}};
  return f;
}

constexpr int kDim = 256, kHidden = 512, kVocab = 80, kLayers = 2, kHeads = 4, kKvHeads = 2;
constexpr int kHeadDim = kDim / kHeads;

// Writes the same model of architecture `arch` (llama's layout, or phi3's with q/k/v and gate/up
// stacked in one tensor each; `extra` adds metadata) twice: `quantized` with each tensor in the
// next format of formats(), `f32` with those tensors dequantized; the tensors' format names in
// file order.
std::vector<std::string> write_twins(const std::string& quantized, const std::string& f32,
                                     const std::string& arch = "llama",
                                     const std::function<void(testing::GgufWriter&)>& extra = {}) {
  testing::GgufWriter q, f;
  for (testing::GgufWriter* w : {&q, &f}) {
    w->add_string("general.architecture", arch);
    w->add_u32(arch + ".embedding_length", kDim);
    w->add_u32(arch + ".feed_forward_length", kHidden);
    w->add_u32(arch + ".block_count", kLayers);
    w->add_u32(arch + ".attention.head_count", kHeads);
    w->add_u32(arch + ".attention.head_count_kv", kKvHeads);
    w->add_u32(arch + ".context_length", 64);
    w->add_f32(arch + ".rope.freq_base", 10000.0f);
    w->add_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
    if (extra) extra(*w);
  }
  std::mt19937 rng(11);
  std::vector<std::string> order;
  const auto matrix = [&](const std::string& name, int rows, int cols) {
    const BlockFormat& fmt = formats()[order.size() % formats().size()];
    order.push_back(fmt.name);
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    // Factors' exponent fields up to 9 (|d| < 2^-5): weights of a few units at most, logits finite.
    const std::vector<uint8_t> blocks = testing::random_blocks(fmt, n / fmt.weights, rng, 9);
    std::vector<float> w(n);  // [rows, cols]
    fmt.dequantize(blocks.data(), w.data(), n);
    const std::vector<uint64_t> dims = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
    q.add_tensor(name, dims, fmt.type, blocks);
    f.add_f32_tensor(name, dims, w);
  };
  const auto norm = [&](const std::string& name) {
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    std::vector<float> v(kDim);
    for (float& x : v) x = u(rng);
    q.add_f32_tensor(name, {kDim}, v);
    f.add_f32_tensor(name, {kDim}, v);
  };
  matrix("token_embd.weight", kVocab, kDim);
  matrix("output.weight", kVocab, kDim);
  norm("output_norm.weight");
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    norm(b + "attn_norm.weight");
    if (arch == "phi3") {
      matrix(b + "attn_qkv.weight", (kHeads + 2 * kKvHeads) * kHeadDim, kDim);
    } else {
      matrix(b + "attn_q.weight", kHeads * kHeadDim, kDim);
      matrix(b + "attn_k.weight", kKvHeads * kHeadDim, kDim);
      matrix(b + "attn_v.weight", kKvHeads * kHeadDim, kDim);
    }
    matrix(b + "attn_output.weight", kDim, kHeads * kHeadDim);
    norm(b + "ffn_norm.weight");
    if (arch == "phi3") {
      matrix(b + "ffn_up.weight", 2 * kHidden, kDim);
    } else {
      matrix(b + "ffn_gate.weight", kHidden, kDim);
      matrix(b + "ffn_up.weight", kHidden, kDim);
    }
    matrix(b + "ffn_down.weight", kDim, kHidden);
  }
  q.write(quantized);
  f.write(f32);
  return order;
}

// The prompt both models decode from, 8 greedy steps.
void expect_same_decoding(const Model& qm, const Model& fm) {
  testing::expect_same_decoding(qm, fm, {1, 17, 42, 5, 63, 9}, 8);
}

TEST(GgufQuantizedModel, MatricesStayQuantizedAndDecodeAsTheirFp32Twin) {
  TempDir dir;
  const std::string qpath = dir.file("q.gguf"), fpath = dir.file("f32.gguf");
  const std::vector<std::string> order = write_twins(qpath, fpath);
  const Model qm = load_model(qpath), fm = load_model(fpath);

  // Matrices in file order: the embedding and classifier, then each layer's seven.
  std::vector<const PackedMatrix*> q_mats = {&qm.weights.token_embedding, &qm.weights.classifier};
  std::vector<const PackedMatrix*> f_mats = {&fm.weights.token_embedding, &fm.weights.classifier};
  for (int l = 0; l < kLayers; ++l) {
    for (auto [mats, m] : {std::pair{&q_mats, &qm}, std::pair{&f_mats, &fm}}) {
      const LayerWeights& lw = m->weights.layers[l];
      for (const PackedMatrix* p : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down})
        mats->push_back(p);
    }
  }
  ASSERT_EQ(q_mats.size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    SCOPED_TRACE(order[i] + " matrix " + std::to_string(i));
    EXPECT_TRUE(q_mats[i]->quantized());
    EXPECT_FALSE(f_mats[i]->quantized());
    EXPECT_EQ(q_mats[i]->unpacked(), f_mats[i]->unpacked());
  }
  EXPECT_LT(qm.weight_bytes_per_token() * 2, fm.weight_bytes_per_token());  // 6-16 bits a weight
  expect_same_decoding(qm, fm);
}

// Phi-3's stacked tensors: each part keeps the stack's format, from its own rows' blocks.
TEST(GgufQuantizedModel, StackedMatricesStayQuantizedPartByPart) {
  TempDir dir;
  const std::string qpath = dir.file("q.gguf"), fpath = dir.file("f32.gguf");
  write_twins(qpath, fpath, "phi3");
  const Model qm = load_model(qpath), fm = load_model(fpath);
  EXPECT_EQ(qm.config.arch, "phi3");
  const Model::MatrixCount count = qm.matrix_count();
  EXPECT_EQ(count.as_stored, count.matrices);
  for (int l = 0; l < kLayers; ++l) {
    const auto q = qm.weights.layers[l].matrices(), f = fm.weights.layers[l].matrices();
    for (std::size_t i = 0; i < q.size(); ++i) EXPECT_EQ(q[i]->unpacked(), f[i]->unpacked()) << "layer " << l;
  }
  expect_same_decoding(qm, fm);
}

// Partial rotation (Phi-4-mini's): the loader permutes q/k rows, which move as stored.
TEST(GgufQuantizedModel, PermutedRowsStayQuantized) {
  TempDir dir;
  const std::string qpath = dir.file("q.gguf"), fpath = dir.file("f32.gguf");
  write_twins(qpath, fpath, "phi3", [](testing::GgufWriter& w) { w.add_u32("phi3.rope.dimension_count", 48); });
  const Model qm = load_model(qpath), fm = load_model(fpath);
  EXPECT_EQ(qm.config.rotary_dim, 48);
  const Model::MatrixCount count = qm.matrix_count();
  EXPECT_EQ(count.as_stored, count.matrices);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(qm.weights.layers[l].wq.unpacked(), fm.weights.layers[l].wq.unpacked()) << "layer " << l;
    EXPECT_EQ(qm.weights.layers[l].wk.unpacked(), fm.weights.layers[l].wk.unpacked()) << "layer " << l;
  }
  expect_same_decoding(qm, fm);
}

// Granite's multipliers folded into quantized q, output and down projections: their blocks'
// factors scaled (weights within a rounding or two of the fp32 twin's, folded weight by weight).
TEST(GgufQuantizedModel, FoldedMultipliersKeepTheMatricesQuantized) {
  TempDir dir;
  const std::string qpath = dir.file("q.gguf"), fpath = dir.file("f32.gguf");
  write_twins(qpath, fpath, "granite", [](testing::GgufWriter& w) {
    w.add_f32("granite.attention.scale", 0.2f);
    w.add_f32("granite.residual_scale", 0.22f);
    w.add_f32("granite.logit_scale", 8.0f);
  });
  const Model qm = load_model(qpath), fm = load_model(fpath);
  const Model::MatrixCount count = qm.matrix_count();
  EXPECT_EQ(count.as_stored, count.matrices);
  for (int l = 0; l < kLayers; ++l) {
    const auto q = qm.weights.layers[l].matrices(), f = fm.weights.layers[l].matrices();
    for (std::size_t i = 0; i < q.size(); ++i) {
      EXPECT_LE(testing::relative_difference(q[i]->unpacked(), f[i]->unpacked()), 4e-7f)
          << "layer " << l << " matrix " << i;
    }
  }
  testing::expect_same_decoding(qm, fm, {1, 17, 42, 5, 63, 9}, 8, 1e-4f, false);
}

}  // namespace
}  // namespace kvs
