// End to end: stories260K (.bin and .gguf; over an fp32, fp16 or bf16 cache) greedily continues
// "Once upon a time" with the text llama2.c documents (../shared/models/SOURCES.md); SmolLM2-135M-Instruct, when present in the
// model cache, answers a short chat question.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "inference/engine.h"
#include "inference/generate.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

const std::string kModels = test::shared_path("models/stories260K/");
const std::vector<int> kPromptIds = {1, 403, 407, 261, 378};
const std::string kExpected =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high. "
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do.";

// Whitespace runs become one space (the reference text is wrapped in SOURCES.md).
std::string squash(const std::string& s) {
  std::istringstream in(s);
  std::string word, out;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

void expect_reference_story(const std::string& model_path, const std::string& tokenizer_path,
                            EngineOptions options = {}) {
  if (!std::filesystem::exists(model_path)) GTEST_SKIP() << model_path << " not found";
  const Model model = load_model(model_path);
  const auto tok = load_tokenizer(model, tokenizer_path);
  EXPECT_EQ(tok->encode("Once upon a time", true), kPromptIds);
  Engine engine(model, options);
  GenerateRequest req;
  req.prompt = kPromptIds;
  req.steps = 60;
  req.end_ids = text_end_ids(model, *tok);
  const std::vector<int> out = generate(engine, req);
  ASSERT_EQ(out.size(), 60u);
  std::vector<int> all = kPromptIds;
  all.insert(all.end(), out.begin(), out.end());
  const std::string text = squash(tok->decode(all));
  EXPECT_GT(text.size(), 120u);
  EXPECT_EQ(text, kExpected.substr(0, text.size())) << "generated: " << text;
}

TEST(GenerateStories, Llama2cBinGreedyMatchesReference) {
  expect_reference_story(kModels + "stories260K.bin", kModels + "tok512.bin");
}

// A 16-bit cache keeps the reference story's greedy choices.
TEST(GenerateStories, Llama2cBinGreedyMatchesReferenceOverA16BitCache) {
  for (const KvDtype kv : {KvDtype::Fp16, KvDtype::Bf16}) {
    SCOPED_TRACE(kv_dtype_name(kv));
    EngineOptions o;
    o.kv_dtype = kv;
    expect_reference_story(kModels + "stories260K.bin", kModels + "tok512.bin", o);
  }
}

TEST(GenerateStories, GgufGreedyMatchesReference) {
  expect_reference_story(kModels + "stories260K.gguf", "");
}

TEST(GenerateStories, SmolLM2AnswersAChatQuestionWhenPresent) {
  const std::string path = default_model_path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  const Model model = load_model(path);
  const auto tok = load_tokenizer(model, "");
  Engine engine(model);
  GenerateRequest req;
  req.prompt = tok->encode(
      "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
      tok->add_bos());
  req.steps = 12;
  req.end_ids = text_end_ids(model, *tok);
  const std::string text = tok->decode(generate(engine, req));
  EXPECT_NE(text.find("Paris"), std::string::npos) << "generated: " << text;
}

}  // namespace
}  // namespace kvs
