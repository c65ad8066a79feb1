// load_model(path, ModelParts::ConfigOnly), what `kvscope tokenize` loads: the configuration a
// whole load gives, no weights, and the same refusals of files that are not models.
#include <gtest/gtest.h>

#include <filesystem>

#include "inference/chat_template.h"
#include "inference/loader.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::shared_model;
using testing::TempDir;

void expect_same_config(const Model& whole, const Model& config) {
  EXPECT_EQ(config.path, whole.path);
  EXPECT_EQ(config.format, whole.format);
  EXPECT_EQ(config.weight_type, whole.weight_type);
  const ModelConfig &a = whole.config, &b = config.config;
  EXPECT_EQ(b.arch, a.arch);
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.dim, a.dim);
  EXPECT_EQ(b.hidden_dim, a.hidden_dim);
  EXPECT_EQ(b.n_layers, a.n_layers);
  EXPECT_EQ(b.n_heads, a.n_heads);
  EXPECT_EQ(b.n_kv_heads, a.n_kv_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.seq_len, a.seq_len);
  EXPECT_EQ(b.tied_classifier, a.tied_classifier);
  EXPECT_EQ(b.end_ids, a.end_ids);
  // No weights read.
  EXPECT_TRUE(config.weights.token_embedding.empty());
  EXPECT_TRUE(config.weights.layers.empty());
  EXPECT_EQ(config.parameter_count(), 0u);
  EXPECT_GT(whole.parameter_count(), 0u);
}

TEST(LoaderConfigOnly, EachFormatGivesTheWholeLoadsConfiguration) {
  for (const char* rel : {"stories260K/stories260K.bin", "stories260K/stories260K.gguf", "stories260K-hf",
                          "fixtures/llama-2-tiny-random.gguf"}) {
    SCOPED_TRACE(rel);
    const std::string path = shared_model(rel);
    const Model whole = load_model(path);
    const Model config = load_model(path, ModelParts::ConfigOnly);
    expect_same_config(whole, config);
    // The tokenizer and chat format come out the same: all that tokenize needs.
    EXPECT_EQ(load_tokenizer(config, "")->encode("Once upon a time", true),
              load_tokenizer(whole, "")->encode("Once upon a time", true));
    EXPECT_EQ(chat_template_for_model(config), chat_template_for_model(whole));
  }
}

TEST(LoaderConfigOnly, RefusesWhatAWholeLoadRefuses) {
  TempDir dir;
  // A truncated checkpoint: its header asks for more bytes than the file has.
  const std::vector<char> bytes = testing::read_bytes(shared_model("stories260K/stories260K.bin"));
  testing::write_bytes(dir.file("cut.bin"), bytes.data(), bytes.size() / 2);
  const std::string cut = dir.file("cut.bin");
  EXPECT_EQ(input_error_of([&] { load_model(cut, ModelParts::ConfigOnly); }),
            input_error_of([&] { load_model(cut); }));
  const std::string tok = shared_model("stories260K/tok512.bin");
  EXPECT_EQ(input_error_of([&] { load_model(tok, ModelParts::ConfigOnly); }),
            tok + ": is a llama2.c tokenizer, not a model (give it as --tokenizer)");
  // An HF folder whose config.json is there but whose weights are not.
  std::filesystem::create_directory(dir.file("hf"));
  std::filesystem::copy_file(shared_model("stories260K-hf/config.json"), dir.file("hf/config.json"));
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("hf"), ModelParts::ConfigOnly); }),
            input_error_of([&] { load_model(dir.file("hf")); }));
}

}  // namespace
}  // namespace kvs
