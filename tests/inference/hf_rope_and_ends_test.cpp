// Hugging Face config.json as transformers 5 writes it and the settings beside it, on
// stories260K-hf's weights: RoPE's base and scaling in one rope_parameters object (it was ignored:
// theta 10000 and no scaling, so attention and tokens differed from transformers'); eos_token_id
// lists in config.json and generation_config.json, which end the text as transformers' generate
// ends it; a classifier the checkpoint holds under tie_word_embeddings; each architecture's default
// context.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "inference/engine.h"
#include "inference/generate.h"
#include "inference/loader.h"
#include "loader_test_util.h"
#include "safetensors_writer.h"

namespace kvs {
namespace {

using testing::config_with;
using testing::copy_side_files;
using testing::copy_with_weights;
using testing::hf_config;
using testing::input_error_of;
using testing::RawTensor;
using testing::read_raw;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;
using testing::write_safetensors;

// config.json with `text` inserted after its opening brace.
std::string with_keys(const std::string& text) { return "{" + text + "," + hf_config().substr(1); }

TEST(HfRopeParameters, ThetaAndScalingComeFromTheOneObject) {
  {  // llama3 scaling and theta 500000, over the file's top-level rope_theta 10000
    TempDir dir;
    copy_with_weights(dir, with_keys("\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, "
                                "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                                "\"original_max_position_embeddings\": 256}"));
    const Model m = load_model(dir.file(""));
    EXPECT_EQ(m.config.rope_theta, 500000.0f);
    EXPECT_EQ(m.config.rope_scaling.type, "llama3");
    EXPECT_EQ(m.config.rope_scaling.factor, 8.0f);
    EXPECT_EQ(m.config.rope_scaling.original_max_position, 256);
  }
  {  // the default type: theta alone
    TempDir dir;
    copy_with_weights(dir, with_keys("\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}"));
    const Model m = load_model(dir.file(""));
    EXPECT_EQ(m.config.rope_theta, 1000000.0f);
    EXPECT_EQ(m.config.rope_scaling.type, "");
  }
  {  // linear scaling without a theta of its own: the top-level one
    TempDir dir;
    copy_with_weights(dir, with_keys("\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0}"));
    const Model m = load_model(dir.file(""));
    EXPECT_EQ(m.config.rope_theta, 10000.0f);
    EXPECT_EQ(m.config.rope_scaling.type, "linear");
    EXPECT_EQ(m.config.rope_scaling.factor, 2.0f);
  }
}

// LongRoPE (Phi-3's 128K models): the short and long factors, one per frequency (stories260K-hf's
// head_dim 8: four); the original context from config.json's own original_max_position_embeddings
// (where Phi-3 keeps it); the attention factor sqrt(1 + ln(512 / 128) / ln 128) where none is given.
TEST(HfRopeParameters, LongRopeFactors) {
  TempDir dir;
  copy_with_weights(dir, with_keys("\"original_max_position_embeddings\": 128, \"rope_scaling\": {\"type\": "
                                   "\"longrope\", \"short_factor\": [1, 1.5, 2, 3], \"long_factor\": [1, 4, 9, 16]}"));
  const Model m = load_model(dir.file(""));
  const RopeScaling& r = m.config.rope_scaling;
  EXPECT_EQ(r.type, "longrope");
  EXPECT_EQ(r.original_max_position, 128);
  EXPECT_EQ(r.short_factor, (std::vector<float>{1.0f, 1.5f, 2.0f, 3.0f}));
  EXPECT_EQ(r.long_factor, (std::vector<float>{1.0f, 4.0f, 9.0f, 16.0f}));
  EXPECT_NEAR(r.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(128.0)), 1e-6);
  EXPECT_FALSE(m.config.long_rope(128));
  EXPECT_TRUE(m.config.long_rope(129));
}

TEST(HfRopeParameters, WhatTheEngineCannotRunIsRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"\"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 4.0}",
       "unsupported rope_parameters type \"dynamic\" (supported: llama3, linear, yarn, longrope)"},
      {"\"rope_parameters\": {\"rope_type\": \"longrope\", \"short_factor\": [1, 1, 1, 1], \"long_factor\": [1, 2]}",
       "rope_parameters.long_factor is not a list of 4 factors (rotated dims / 2)"},
      {"\"rope_parameters\": {\"rope_type\": \"longrope\", \"long_factor\": [1, 1, 1, 1]}",
       "missing rope_parameters.short_factor"},
      {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"beta_fast\": -2}",
       "rope_parameters.beta_fast has an invalid value -2"},
      {"\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}}",
       "rope_parameters per layer type (\"full_attention\") is not supported"},
      {"\"rope_parameters\": 5", "rope_parameters is not an object"},
      {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": -1}",
       "rope_parameters.rope_theta has an invalid value -1"},
  };
  for (const auto& [keys, problem] : cases) {
    TempDir dir;
    copy_with_weights(dir, with_keys(keys));
    const std::string error = input_error_of([&] { load_model(dir.file("")); });
    EXPECT_EQ(error.rfind(dir.file("config.json") + ": " + problem, 0), 0u) << error;
  }
}

// Greedy stories260K-hf, ended by the eos_token_id lists: at the fourth token when config.json
// lists it, at the second when generation_config.json lists that one.
TEST(HfEndTokens, EosTokenListsEndTheText) {
  TempDir plain;
  copy_with_weights(plain, "");
  const Model m = load_model(plain.file(""));
  const auto tok = load_tokenizer(m, "");
  Engine engine(m);
  GenerateRequest req;
  req.prompt = tok->encode("Once upon a time", true);
  req.steps = 8;
  req.end_ids = text_end_ids(m, *tok);
  EXPECT_EQ(req.end_ids, (std::vector<int>{1, 2}));  // BOS and EOS
  const std::vector<int> free_text = generate(engine, req);
  ASSERT_EQ(free_text.size(), 8u);

  TempDir dir;
  copy_with_weights(dir, config_with(hf_config(), "eos_token_id", "[2, " + std::to_string(free_text[3]) + "]"));
  const std::string gen = "{\"eos_token_id\": " + std::to_string(free_text[1]) + "}";
  const Model listed = load_model(dir.file(""));
  EXPECT_EQ(text_end_ids(listed, *tok), (std::vector<int>{1, 2, free_text[3]}));
  Engine e1(listed);
  req.end_ids = text_end_ids(listed, *tok);
  EXPECT_EQ(generate(e1, req), std::vector<int>(free_text.begin(), free_text.begin() + 3));

  write_bytes(dir.file("generation_config.json"), gen.data(), gen.size());
  const Model both = load_model(dir.file(""));
  Engine e2(both);
  req.end_ids = text_end_ids(both, *tok);
  EXPECT_EQ(generate(e2, req), std::vector<int>(free_text.begin(), free_text.begin() + 1));
}

TEST(HfEndTokens, AnIdOutsideTheVocabularyIsRefusedNamingItsFile) {
  for (const auto& [value, problem] : std::vector<std::pair<std::string, std::string>>{
           {"[2, 512]", "eos_token_id holds 512, not a token id (0..511)"},
           {"\"</s>\"", "eos_token_id holds a string, not a token id (0..511)"},
           {"[2.5]", "eos_token_id holds 2.5, not a token id (0..511)"}}) {
    TempDir dir;
    copy_with_weights(dir, config_with(hf_config(), "eos_token_id", value));
    EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }), dir.file("config.json") + ": " + problem);
  }
  TempDir dir;
  copy_with_weights(dir, "");
  const std::string gen = "{\"eos_token_id\": -3}";
  write_bytes(dir.file("generation_config.json"), gen.data(), gen.size());
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("generation_config.json") + ": eos_token_id holds -3, not a token id (0..511)");
}

// tie_word_embeddings true, but the file has its own lm_head.weight: that is the classifier, as
// transformers 5 runs it.
TEST(HfClassifier, ACheckpointsOwnLmHeadIsUsedEvenWhenTied) {
  TempDir dir;
  copy_side_files(dir, "");
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  RawTensor head{"lm_head.weight", "F32", {512, 64}, std::vector<char>(512 * 64 * 4)};
  const float three = 3.0f;
  for (size_t i = 0; i < 512 * 64; ++i) std::memcpy(head.data.data() + 4 * i, &three, 4);
  all.push_back(head);
  write_safetensors(dir.file("model.safetensors"), all);
  const Model m = load_model(dir.file(""));
  EXPECT_FALSE(m.config.tied_classifier);
  EXPECT_EQ(m.classifier().unpacked()[100], 3.0f);
}

// Without max_position_embeddings, each architecture's context is transformers' default.
TEST(HfContext, DefaultsFollowTheArchitecture) {
  const std::pair<std::string, int> cases[] = {
      {"LlamaForCausalLM", 2048}, {"MistralForCausalLM", 131072}, {"Qwen2ForCausalLM", 32768}};
  for (const auto& [arch, context] : cases) {
    const std::string config = config_with(config_with(hf_config(), "max_position_embeddings", "null"),
                                           "architectures", "[\"" + arch + "\"]");
    TempDir dir;
    copy_side_files(dir, config);
    std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
    if (arch == "Qwen2ForCausalLM")  // Qwen2 has q/k/v biases
      for (int l = 0; l < 5; ++l)
        for (const auto& [name, n] : std::vector<std::pair<std::string, uint64_t>>{
                 {"q_proj", 64}, {"k_proj", 32}, {"v_proj", 32}})
          all.push_back(RawTensor{"model.layers." + std::to_string(l) + ".self_attn." + name + ".bias", "F32", {n},
                                  std::vector<char>(n * 4)});
    write_safetensors(dir.file("model.safetensors"), all);
    EXPECT_EQ(load_model(dir.file("")).config.seq_len, context) << arch;
  }
}

}  // namespace
}  // namespace kvs
