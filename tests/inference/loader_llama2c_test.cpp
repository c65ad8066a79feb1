// llama2.c checkpoint loading: stories260K's header and weights, a separate classifier, and
// bad inputs (truncated file, other formats).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "inference/loader.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::read_bytes;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

float float_at(const std::vector<char>& bytes, std::size_t index) {
  float f;
  std::memcpy(&f, bytes.data() + 28 + 4 * index, 4);
  return f;
}

TEST(LoaderLlama2c, Stories260KHeader) {
  const Model m = load_model(shared_model("stories260K/stories260K.bin"));
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.tied_classifier);
  EXPECT_EQ(c.rope_style, RopeStyle::Interleaved);
  EXPECT_EQ(c.name, "stories260K");
  EXPECT_EQ(m.format, "llama2c");
  EXPECT_EQ(m.weight_type, "F32");
  ASSERT_EQ(m.weights.layers.size(), 5u);
  EXPECT_EQ(m.weights.token_embedding.size(), 512u * 64);
  EXPECT_EQ(m.weights.layers[0].wk.size(), 32u * 64);
  EXPECT_EQ(m.weights.layers[4].w_down.size(), 64u * 172);
  EXPECT_TRUE(m.weights.classifier.empty());
}

TEST(LoaderLlama2c, Stories260KWeightsAtTheirOffsets) {
  const std::string path = shared_model("stories260K/stories260K.bin");
  const Model m = load_model(path);
  const std::vector<char> bytes = read_bytes(path);
  const LayerWeights* l = m.weights.layers.data();
  // Offsets (in floats after the header) from llama2.c's order for this shape.
  const std::size_t emb = 512 * 64, rms_att = 5 * 64, wq = 5 * 64 * 64, wk = 5 * 32 * 64;
  EXPECT_EQ(m.weights.token_embedding.unpacked()[0], float_at(bytes, 0));
  EXPECT_EQ(m.weights.token_embedding.unpacked()[emb - 1], float_at(bytes, emb - 1));
  EXPECT_EQ(l[1].attn_norm[3], float_at(bytes, emb + 64 + 3));
  EXPECT_EQ(l[2].wk.unpacked()[7], float_at(bytes, emb + rms_att + wq + 2 * 32 * 64 + 7));
  const std::size_t w1 = emb + rms_att + wq + 2 * wk + wq + rms_att;
  const std::size_t w2 = w1 + 5 * 172 * 64, w3 = w2 + 5 * 172 * 64;
  EXPECT_EQ(l[0].w_gate.unpacked()[100], float_at(bytes, w1 + 100));
  EXPECT_EQ(l[3].w_down.unpacked()[5], float_at(bytes, w2 + 3 * 172 * 64 + 5));
  EXPECT_EQ(l[4].w_up.unpacked().back(), float_at(bytes, w3 + 5 * 172 * 64 - 1));
  EXPECT_EQ(m.weights.final_norm[63], float_at(bytes, w3 + 5 * 172 * 64 + 63));
}

// A tiny checkpoint with a separate classifier (negative vocab_size): dim 4, hidden 8, 1 layer,
// 2 heads, 1 KV head, vocab 6, seq_len 4; weight i holds the value i.
TEST(LoaderLlama2c, SeparateClassifier) {
  TempDir dir;
  const int32_t header[7] = {4, 8, 1, 2, 1, -6, 4};
  const std::size_t floats = 6 * 4 + 4 + 16 + 8 + 8 + 16 + 4 + 32 * 3 + 4 + 4 * 2 + 6 * 4;
  std::vector<char> bytes(28 + 4 * floats);
  std::memcpy(bytes.data(), header, 28);
  for (std::size_t i = 0; i < floats; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(bytes.data() + 28 + 4 * i, &v, 4);
  }
  const std::string path = dir.file("sep.bin");
  write_bytes(path, bytes);
  const Model m = load_model(path);
  EXPECT_FALSE(m.config.tied_classifier);
  EXPECT_EQ(m.config.vocab_size, 6);
  EXPECT_EQ(m.config.kv_dim(), 2);
  ASSERT_EQ(m.weights.classifier.size(), 24u);
  EXPECT_EQ(m.weights.classifier.unpacked()[0], static_cast<float>(floats - 24));
  EXPECT_EQ(m.classifier().unpacked().back(), static_cast<float>(floats - 1));
  EXPECT_EQ(m.weights.layers[0].wk.unpacked()[0], 24.0f + 4 + 16);
  EXPECT_EQ(m.weights.final_norm[0], static_cast<float>(floats - 24 - 8 - 4));
}

TEST(LoaderLlama2c, TruncatedFileIsNamed) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model("stories260K/stories260K.bin"));
  bytes.resize(500000);
  const std::string path = dir.file("cut.bin");
  write_bytes(path, bytes);
  const std::string msg = input_error_of([&] { load_model(path); });
  EXPECT_EQ(msg.rfind(path + ": truncated file (500000 bytes", 0), 0u) << msg;
  EXPECT_NE(msg.find("needs 1056540"), std::string::npos) << msg;
}

TEST(LoaderLlama2c, OtherFormatsAreRejected) {
  TempDir dir;
  const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,   0, 0,
                               13,   'I', 'H', 'D', 'R',  0,    0,    0,    1,   0, 0,
                               0,    1,   8,   6,   0,    0,    0,    0x1f, 0x15};
  const std::string png_path = dir.file("image.png");
  write_bytes(png_path, png, sizeof png);
  std::string msg = input_error_of([&] { load_model(png_path); });
  EXPECT_EQ(msg.rfind(png_path + ": not a llama2.c checkpoint (implausible header", 0), 0u) << msg;

  const std::string text = "This is a plain text file, not model weights at all.\n";
  const std::string txt_path = dir.file("notes.bin");
  write_bytes(txt_path, text.data(), text.size());
  msg = input_error_of([&] { load_model(txt_path); });
  EXPECT_EQ(msg.rfind(txt_path + ": not a llama2.c checkpoint", 0), 0u) << msg;

  const std::string tiny_path = dir.file("tiny.bin");
  write_bytes(tiny_path, "abc", 3);
  msg = input_error_of([&] { load_model(tiny_path); });
  EXPECT_NE(msg.find("shorter than the 28-byte header"), std::string::npos) << msg;

  msg = input_error_of([&] { load_model(dir.file("missing.bin")); });
  EXPECT_EQ(msg, dir.file("missing.bin") + ": no such file or folder");
}

TEST(LoaderLlama2c, ExtraTrailingBytesAreRejected) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model("stories260K/stories260K.bin"));
  bytes.resize(bytes.size() + 8, 0);
  const std::string path = dir.file("long.bin");
  write_bytes(path, bytes);
  const std::string msg = input_error_of([&] { load_model(path); });
  EXPECT_NE(msg.find("not a llama2.c checkpoint (1056548 bytes"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kvs
