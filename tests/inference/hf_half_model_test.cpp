// A Hugging Face folder in fp16 or bf16 runs as its fp32 twin: stories260K-hf's weights rounded
// to the 16-bit format and written once in it and once as the fp32 values it holds load to
// matrices kept in 16 bits (kernels/quant_panels.h) against fp32 ones, with half the bytes a
// token reads, and give the same prefill logits (bit for bit) and the same greedy tokens and
// logits (to rounding: quant_panel_dot) through decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "inference/loader.h"
#include "kernels/quant.h"
#include "loader_test_util.h"
#include "safetensors_writer.h"
#include "twin_decoding.h"

namespace kvs {
namespace {

using testing::copy_side_files;
using testing::RawTensor;
using testing::read_raw;
using testing::shared_model;
using testing::TempDir;
using testing::write_safetensors;

// Writes stories260K-hf into `half` with its matrices (the tensors of two dimensions) in `dtype`
// ("F16" or "BF16"), and into `f32` with the values those hold, as F32; `config` ("": its own)
// as both's config.json.
void write_twins(const TempDir& half, const TempDir& f32, const std::string& dtype, const std::string& config = "") {
  copy_side_files(half, config);
  copy_side_files(f32, config);
  std::vector<RawTensor> h = read_raw(shared_model("stories260K-hf/model.safetensors")), f = h;
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i].shape.size() != 2) continue;
    const std::size_t n = h[i].data.size() / sizeof(float);
    std::vector<float> w(n);  // [rows * cols]
    std::memcpy(w.data(), h[i].data.data(), n * sizeof(float));
    h[i].dtype = dtype;
    h[i].data.resize(2 * n);
    for (std::size_t k = 0; k < n; ++k) {
      const uint16_t bits = dtype == "F16" ? fp32_to_fp16(w[k]) : fp32_to_bf16(w[k]);
      h[i].data[2 * k] = static_cast<char>(bits & 0xff);
      h[i].data[2 * k + 1] = static_cast<char>(bits >> 8);
      w[k] = dtype == "F16" ? fp16_to_fp32(bits) : bf16_to_fp32(bits);
    }
    std::memcpy(f[i].data.data(), w.data(), n * sizeof(float));
  }
  write_safetensors(half.file("model.safetensors"), h);
  write_safetensors(f32.file("model.safetensors"), f);
}

TEST(HfHalfModel, MatricesStayIn16BitsAndDecodeAsTheirFp32Twin) {
  for (const std::string dtype : {"F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    TempDir half_dir, f32_dir;
    write_twins(half_dir, f32_dir, dtype);
    const Model hm = load_model(half_dir.file("")), fm = load_model(f32_dir.file(""));
    EXPECT_EQ(hm.weight_type, dtype + " (mixed)");  // the norms stay F32
    const Model::MatrixCount count = hm.matrix_count();
    EXPECT_EQ(count.as_stored, count.matrices);
    EXPECT_EQ(fm.matrix_count().as_stored, 0);
    for (std::size_t l = 0; l < hm.weights.layers.size(); ++l) {
      const auto h = hm.weights.layers[l].matrices(), f = fm.weights.layers[l].matrices();
      for (std::size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i]->unpacked(), f[i]->unpacked()) << "layer " << l;
    }
    // Half the matrices' bytes; the norms and the embedding row stay fp32.
    EXPECT_LT(hm.weight_bytes_per_token(), 0.55 * static_cast<double>(fm.weight_bytes_per_token()));

    testing::expect_same_decoding(hm, fm, {1, 403, 407, 261, 378}, 24);  // "Once upon a time"
  }
}

// Granite's multipliers, folded into 16-bit matrices: residual_multiplier 0.22 into wo and w_down,
// attention_multiplier 0.3 (0.3 sqrt(head_dim) of the engine's scale) into wq. No 16-bit weight
// times them is again a 16-bit value, so each matrix carries its factor (PackedMatrix::factor)
// instead of going to fp32: still half the bytes, the fp32 twin's folded weights bit for bit,
// its prefill bit for bit and its decoding to a rounding.
TEST(HfHalfModel, GranitesMultipliersKeepTheMatricesIn16Bits) {
  const std::string granite = testing::config_with(
      testing::config_with(testing::hf_config(), "architectures", "[\"GraniteForCausalLM\"]"), "model_type",
      "\"granite\", \"embedding_multiplier\": 12.0, \"residual_multiplier\": 0.22, "
      "\"attention_multiplier\": 0.3, \"logits_scaling\": 4.0");
  for (const std::string dtype : {"F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    TempDir half_dir, f32_dir;
    write_twins(half_dir, f32_dir, dtype, granite);
    const Model hm = load_model(half_dir.file("")), fm = load_model(f32_dir.file(""));
    ASSERT_EQ(hm.config.arch, "granite");
    const Model::MatrixCount count = hm.matrix_count();
    EXPECT_EQ(count.as_stored, count.matrices);
    for (std::size_t l = 0; l < hm.weights.layers.size(); ++l) {
      const LayerWeights& h = hm.weights.layers[l];
      EXPECT_EQ(h.wo.factor, 0.22f);
      EXPECT_EQ(h.w_down.factor, 0.22f);
      EXPECT_EQ(h.wq.factor, 0.3f * std::sqrt(8.0f));
      EXPECT_EQ(h.wk.factor, 1.0f);
      const auto hs = h.matrices(), fs = fm.weights.layers[l].matrices();
      for (std::size_t i = 0; i < hs.size(); ++i) EXPECT_EQ(hs[i]->unpacked(), fs[i]->unpacked()) << "layer " << l;
    }
    EXPECT_LT(hm.weight_bytes_per_token(), 0.55 * static_cast<double>(fm.weight_bytes_per_token()));
    testing::expect_same_decoding(hm, fm, {1, 403, 407, 261, 378}, 24);
  }
}

}  // namespace
}  // namespace kvs
