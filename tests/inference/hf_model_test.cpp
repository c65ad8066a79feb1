// Hugging Face folders: stories260K-hf equals the llama2.c checkpoint (q/k in rotate-half order)
// and gives the same logits through the engine; a sharded copy loads the same; F16/BF16 weights;
// bad inputs (missing shard, shape mismatch, architecture, dtype, lying offsets).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "inference/engine.h"
#include "inference/json.h"
#include "inference/loader.h"
#include "capture.h"
#include "loader_test_util.h"
#include "safetensors_writer.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;
using testing::copy_side_files;
using testing::hf_config;
using testing::input_error_of;
using testing::RawTensor;
using testing::read_bytes;
using testing::read_raw;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;
using testing::write_safetensors;

const std::string kHf = "stories260K-hf";

void expect_same_weights(const Model& a, const Model& b) {
  EXPECT_EQ(a.weights.token_embedding, b.weights.token_embedding);
  EXPECT_EQ(a.weights.final_norm, b.weights.final_norm);
  ASSERT_EQ(a.weights.layers.size(), b.weights.layers.size());
  for (std::size_t l = 0; l < a.weights.layers.size(); ++l) {
    const LayerWeights& x = a.weights.layers[l];
    const LayerWeights& y = b.weights.layers[l];
    EXPECT_EQ(x.wq, y.wq);
    EXPECT_EQ(x.wk, y.wk);
    EXPECT_EQ(x.wv, y.wv);
    EXPECT_EQ(x.wo, y.wo);
    EXPECT_EQ(x.w_gate, y.w_gate);
    EXPECT_EQ(x.w_up, y.w_up);
    EXPECT_EQ(x.w_down, y.w_down);
    EXPECT_EQ(x.attn_norm, y.attn_norm);
    EXPECT_EQ(x.ffn_norm, y.ffn_norm);
  }
}

TEST(HfModel, Stories260KMatchesTheCheckpoint) {
  const Model bin = load_model(shared_model("stories260K/stories260K.bin"));
  const Model hf = load_model(shared_model(kHf));
  const ModelConfig& c = hf.config;
  EXPECT_EQ(hf.format, "hf");
  EXPECT_EQ(hf.weight_type, "F32");
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.name, "stories260K-hf");
  EXPECT_EQ(c.rope_style, RopeStyle::RotateHalf);
  EXPECT_EQ(std::tie(c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim,
                     c.vocab_size, c.seq_len),
            std::tie(bin.config.dim, bin.config.hidden_dim, bin.config.n_layers, bin.config.n_heads,
                     bin.config.n_kv_heads, bin.config.head_dim, bin.config.vocab_size,
                     bin.config.seq_len));
  EXPECT_TRUE(c.tied_classifier);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(hf.weights.token_embedding, bin.weights.token_embedding);
  const int hd = c.head_dim, D = c.dim;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& x = bin.weights.layers[l];
    const LayerWeights& y = hf.weights.layers[l];
    // HF row h*hd + half*hd/2 + j holds interleaved row h*hd + 2j + half.
    auto permuted_equal = [&](const PackedMatrix& inter_packed, const PackedMatrix& rot_packed, int heads) {
      const WeightVector inter = inter_packed.unpacked(), rot = rot_packed.unpacked();
      for (int h = 0; h < heads; ++h)
        for (int j = 0; j < hd / 2; ++j)
          for (int half = 0; half < 2; ++half)
            for (int col = 0; col < D; ++col)
              if (rot[(h * hd + half * hd / 2 + j) * D + col] !=
                  inter[(h * hd + 2 * j + half) * D + col])
                return false;
      return true;
    };
    EXPECT_TRUE(permuted_equal(x.wq, y.wq, c.n_heads)) << l;
    EXPECT_TRUE(permuted_equal(x.wk, y.wk, c.n_kv_heads)) << l;
    EXPECT_EQ(x.wv, y.wv);
    EXPECT_EQ(x.wo, y.wo);
    EXPECT_EQ(x.w_gate, y.w_gate);
    EXPECT_EQ(x.w_up, y.w_up);
    EXPECT_EQ(x.w_down, y.w_down);
    EXPECT_EQ(x.attn_norm, y.attn_norm);
    EXPECT_EQ(x.ffn_norm, y.ffn_norm);
  }
}

TEST(HfModel, EngineGivesTheSameLogitsAndAttentionAsTheCheckpoint) {
  const Model bin = load_model(shared_model("stories260K/stories260K.bin"));
  const Model hf = load_model(shared_model(kHf));
  Engine a(bin), b(hf);
  tiny::Capture ca, cb;
  a.set_observer(&ca);
  b.set_observer(&cb);
  const std::vector<int> prompt = {1, 403, 407, 261, 378};
  auto pa = a.prefill(prompt);
  auto pb = b.prefill(prompt);
  for (int step = 0; step < 20; ++step) {
    ASSERT_EQ(pa.size(), pb.size());
    // The layouts differ by a permutation of each head's q/k components, so the score sums run
    // in another order: logits agree to a few float32 ulps of the largest, not bit for bit.
    float max_diff = 0.0f, max_abs = 0.0f;
    for (std::size_t i = 0; i < pa.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(pa[i] - pb[i]));
      max_abs = std::max(max_abs, std::fabs(pa[i]));
    }
    EXPECT_LT(max_diff, 1e-6f * max_abs) << "step " << step << ", largest logit " << max_abs;
    const int next_a = static_cast<int>(std::max_element(pa.begin(), pa.end()) - pa.begin());
    const int next_b = static_cast<int>(std::max_element(pb.begin(), pb.end()) - pb.begin());
    ASSERT_EQ(next_a, next_b) << "step " << step;
    pa = a.decode(next_a);
    pb = b.decode(next_b);
  }
  // Every attention row, prefill and decode, agrees within 1e-5 (rotate-half vs interleaved RoPE).
  const auto& ra = ca.rows;
  const auto& rb = cb.rows;
  ASSERT_EQ(ra.size(), rb.size());
  ASSERT_GT(ra.size(), 0u);
  for (std::size_t r = 0; r < ra.size(); ++r) {
    ASSERT_EQ(ra[r].keys, rb[r].keys);
    for (std::size_t j = 0; j < ra[r].probs.size(); ++j)
      ASSERT_NEAR(ra[r].probs[j], rb[r].probs[j], 1e-5f) << "row " << r << " key " << j;
  }
}

TEST(HfModel, ShardedCopyLoadsTheSame) {
  TempDir dir;
  copy_side_files(dir);
  const std::vector<RawTensor> all = read_raw(shared_model(kHf + "/model.safetensors"));
  std::vector<RawTensor> first, second;
  std::string index = "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const bool in_first = i % 2 == 0;
    (in_first ? first : second).push_back(all[i]);
    index += std::string(i ? ", " : "") + "\"" + all[i].name + "\": \"model-0000" +
             (in_first ? "1" : "2") + "-of-00002.safetensors\"";
  }
  index += "}}";
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  write_bytes(dir.file("model.safetensors.index.json"), index.data(), index.size());
  const Model sharded = load_model(dir.file(""));
  expect_same_weights(sharded, load_model(shared_model(kHf)));

  fs::remove(dir.file("model-00002-of-00002.safetensors"));
  const std::string msg = input_error_of([&] { load_model(dir.file("")); });
  EXPECT_EQ(msg.rfind(dir.file("model-00002-of-00002.safetensors") +
                          ": missing shard (listed in model.safetensors.index.json for tensor ",
                      0),
            0u)
      << msg;
}

// fp32 -> half for values exactly representable in fp16 (normal range).
uint16_t to_half(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u, exp = (b >> 23) & 0xff, mant = b & 0x7fffff;
  return static_cast<uint16_t>(sign | ((exp - 112) << 10) | (mant >> 13));
}

TEST(HfModel, HalfAndBfloatWeights) {
  const std::vector<float> norm = {1.0f, -2.0f, 0.5f, 0.375f, 3.0f, -0.125f, 1.5f, 2.25f};
  for (const std::string dtype : {"F16", "BF16"}) {
    TempDir dir;
    copy_side_files(dir);
    std::vector<RawTensor> all = read_raw(shared_model(kHf + "/model.safetensors"));
    for (RawTensor& t : all) {
      if (t.name != "model.norm.weight") continue;
      t.dtype = dtype;
      t.data.clear();
      for (int i = 0; i < 64; ++i) {
        const float v = norm[i % norm.size()];
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t h = dtype == "F16" ? to_half(v) : static_cast<uint16_t>(bits >> 16);
        t.data.push_back(static_cast<char>(h & 0xff));
        t.data.push_back(static_cast<char>(h >> 8));
      }
    }
    write_safetensors(dir.file("model.safetensors"), all);
    const Model m = load_model(dir.file("model.safetensors"));
    EXPECT_EQ(m.weight_type, "F32 (mixed)");
    for (int i = 0; i < 64; ++i) EXPECT_EQ(m.weights.final_norm[i], norm[i % norm.size()]) << dtype;
  }
}

TEST(HfModel, ShapeMismatchNamesFileAndTensor) {
  TempDir dir;
  std::string config = hf_config();
  config.replace(config.find("\"intermediate_size\": 172"), 24, "\"intermediate_size\": 171");
  copy_side_files(dir, config);
  fs::copy_file(shared_model(kHf + "/model.safetensors"), dir.file("model.safetensors"));
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("model.safetensors") +
                ": tensor model.layers.0.mlp.gate_proj.weight has shape [172, 64], config.json "
                "implies [171, 64]");
}

TEST(HfModel, UnsupportedArchitectureAndDtype) {
  TempDir dir;
  std::string config = hf_config();
  config.replace(config.find("LlamaForCausalLM"), 16, "GPTNeoXForCausalLM");
  copy_side_files(dir, config);
  fs::copy_file(shared_model(kHf + "/model.safetensors"), dir.file("model.safetensors"));
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("config.json") +
                ": unsupported architecture \"GPTNeoXForCausalLM\" (supported: "
                "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
                "Gemma2ForCausalLM, Gemma3ForCausalLM, Olmo2ForCausalLM, Olmo3ForCausalLM, SmolLM3ForCausalLM, "
                "GraniteForCausalLM, Exaone4ForCausalLM, Gemma3ForConditionalGeneration)");

  TempDir dir2;
  copy_side_files(dir2);
  std::vector<RawTensor> all = read_raw(shared_model(kHf + "/model.safetensors"));
  for (RawTensor& t : all) {
    if (t.name == "model.norm.weight") t.dtype = "I32";  // same size, unsupported type
  }
  write_safetensors(dir2.file("model.safetensors"), all);
  EXPECT_EQ(input_error_of([&] { load_model(dir2.file("")); }),
            dir2.file("model.safetensors") +
                ": tensor model.norm.weight has unsupported dtype I32 (supported: F32, F16, BF16)");
}

TEST(HfModel, LyingHeaderIsRejected) {
  TempDir dir;
  copy_side_files(dir);
  std::vector<char> bytes = read_bytes(shared_model(kHf + "/model.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  const std::string data(bytes.begin() + 8 + static_cast<long>(n), bytes.end());
  const std::size_t at = header.find("[0,131072]");
  ASSERT_NE(at, std::string::npos);
  header.replace(at, 10, "[0,99999999]");
  std::vector<char> file(8);
  n = header.size();
  std::memcpy(file.data(), &n, 8);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  write_bytes(dir.file("model.safetensors"), file);
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("model.safetensors") +
                ": tensor model.embed_tokens.weight has data_offsets [0, 99999999] "
                "outside the " +
                std::to_string(data.size()) + "-byte data section");
  // A byte range that disagrees with the shape.
  header.replace(at, 12, "[0,131068]");
  file.resize(8);
  n = header.size();
  std::memcpy(file.data(), &n, 8);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  write_bytes(dir.file("model.safetensors"), file);
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("model.safetensors") +
                ": tensor model.embed_tokens.weight has 131068 bytes of data for "
                "its shape, which needs 131072");
}

}  // namespace
}  // namespace kvs
