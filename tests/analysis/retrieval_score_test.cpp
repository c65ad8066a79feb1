// Retrieval-head score: bookkeeping on a hand-built observer sequence, the JSON file format, and
// needle prompts built with the stories260K tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/needle.h"
#include "analysis/retrieval_score.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

// Delivers one decode row to the observer.
void feed_row(ArgmaxObserver& obs, int layer, int head, std::vector<int32_t> keys, std::vector<float> probs) {
  AttentionBlock b;
  b.layer = layer;
  b.head = head;
  b.q_pos0 = keys.back();
  b.n_q = 1;
  b.n_keys = (int)keys.size();
  b.key_pos = keys.data();
  b.probs = probs.data();
  b.decode = true;
  obs.on_attention(b);
}

TEST(RetrievalScoreTest, TallyCountsCopiesFromTheNeedle) {
  // Prompt tokens; the needle occupies positions [3, 7) = tokens 40 41 42 43.
  std::vector<int> tokens = {1, 10, 11, 40, 41, 42, 43, 12, 13};
  TokenSpan needle{3, 7};
  ArgmaxObserver obs(1, 3);
  RetrievalTally tally(1, 3, tokens, needle);
  std::vector<int32_t> keys = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};  // query at 9
  // Step 1 emits 41. Head 0 points at position 4 (token 41): a copy. Head 1 points at 5 (42):
  // in the needle but not the emitted token. Head 2 points at 1: outside the needle.
  feed_row(obs, 0, 0, keys, {0, 0, 0, 0.1f, 0.5f, 0.1f, 0, 0, 0, 0.3f});
  feed_row(obs, 0, 1, keys, {0, 0, 0, 0, 0, 0.9f, 0, 0, 0, 0.1f});
  feed_row(obs, 0, 2, keys, {0, 0.6f, 0, 0, 0, 0, 0, 0, 0, 0.4f});
  EXPECT_EQ(obs.argmax(), (std::vector<int>{4, 5, 1}));
  tally.add_step(obs.argmax(), 41);
  // Step 2 emits 42; head 1 now copies (position 5), head 0 ties between 3 and 5 -> lower, 3 (40).
  std::vector<int32_t> keys2 = {0, 3, 5, 10};  // a sparse row: key_pos maps to positions
  feed_row(obs, 0, 0, keys2, {0.1f, 0.4f, 0.4f, 0.1f});
  feed_row(obs, 0, 1, keys2, {0.1f, 0.1f, 0.7f, 0.1f});
  feed_row(obs, 0, 2, keys2, {0.0f, 0.0f, 1.0f, 0.0f});
  EXPECT_EQ(obs.argmax(), (std::vector<int>{3, 5, 5}));
  tally.add_step(obs.argmax(), 42);
  EXPECT_EQ(tally.scores(), (std::vector<float>{0.25f, 0.25f, 0.25f}));
  tally.add_step(std::vector<int>{6, 6, 8}, 43);
  EXPECT_EQ(tally.scores(), (std::vector<float>{0.5f, 0.5f, 0.25f}));
  // Prefill blocks are ignored.
  AttentionBlock prefill;
  prefill.decode = false;
  obs.on_attention(prefill);
  EXPECT_EQ(obs.argmax(), (std::vector<int>{3, 5, 5}));
}

TEST(RetrievalScoreTest, UnigramRecallClipsCounts) {
  std::vector<int> needle = {5, 6, 7, 7};
  EXPECT_DOUBLE_EQ(unigram_recall(std::vector<int>{7, 5, 6, 7, 9}, needle), 1.0);
  EXPECT_DOUBLE_EQ(unigram_recall(std::vector<int>{7, 7, 7}, needle), 0.5);
  EXPECT_DOUBLE_EQ(unigram_recall(std::vector<int>{}, needle), 0.0);
  EXPECT_DOUBLE_EQ(unigram_recall(needle, std::vector<int>{}), 0.0);
}

TEST(RetrievalScoreTest, JsonRoundTripAndMean) {
  RetrievalScores s;
  s.n_layers = 2;
  s.n_heads = 2;
  s.trials = {{0.5f, 0.25f}, {0.0f, 0.0f}, {1.0f, 0.125f}, {0.1f, 0.3f}};
  const std::string json = retrieval_scores_json(s);
  EXPECT_EQ(json.rfind("{\"0-0\": [0.5, 0.25], \"0-1\": [0, 0], ", 0), 0u) << json;
  RetrievalScores back = parse_retrieval_scores(json, "scores.json");
  EXPECT_EQ(back.n_layers, 2);
  EXPECT_EQ(back.n_heads, 2);
  EXPECT_EQ(back.trials, s.trials);
  EXPECT_EQ(back.n_kept(), 2);
  std::vector<float> m = back.mean();
  EXPECT_FLOAT_EQ(m[0], 0.375f);
  EXPECT_FLOAT_EQ(m[2], 0.5625f);
  EXPECT_FLOAT_EQ(m[3], 0.2f);

  const std::string path = ::testing::TempDir() + "retrieval_scores_test.json";
  write_retrieval_scores(path, s);
  EXPECT_EQ(read_retrieval_scores(path).trials, s.trials);
  std::remove(path.c_str());
  EXPECT_THROW(read_retrieval_scores(path), InputError);
}

TEST(RetrievalScoreTest, ParserAcceptsPublishedLayoutAndRejectsBadFiles) {
  RetrievalScores ok = parse_retrieval_scores(" {\"1-0\": [1e-1], \"0-0\": [0], \"0-1\": [2.5E0],\n\"1-1\": [-0.0]} ", "f");
  EXPECT_EQ(ok.n_layers, 2);
  EXPECT_FLOAT_EQ(ok.trials[2][0], 0.1f);
  EXPECT_FLOAT_EQ(ok.trials[1][0], 2.5f);
  const char* bad[] = {
      "",                                   // empty
      "[]",                                 // not an object
      "{}",                                 // no heads
      "{\"0-0\": [1], \"0-1\": [1]",        // unterminated
      "{\"0-0\": [1],}",                    // trailing comma
      "{\"0-0\": [\"x\"]}",                 // non-number
      "{\"0-0\": [nan]}",                   // non-number
      "{\"0-0\": [1e999]}",                 // overflow
      "{\"0-0\": [+1]}",                    // JSON has no '+'
      "{\"a-0\": [1]}",                     // bad key
      "{\"0-0-0\": [1]}",                   // bad key
      "{\"0-0\": [1], \"0-0\": [2]}",       // duplicate
      "{\"0-0\": [1], \"1-1\": [2]}",       // grid not full
      "{\"0-0\": [1], \"0-1\": [2, 3]}",    // ragged lists
      "{\"0-0\": [1]} x",                   // trailing text
      "{\"0-0\": {\"x\": 1}}",              // nested object
  };
  for (const char* text : bad) {
    EXPECT_THROW(parse_retrieval_scores(text, "heads.json"), InputError) << text;
  }
  try {
    parse_retrieval_scores("{\"0-0\": [x]}", "heads.json");
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("heads.json: ", 0), 0u) << e.what();
  }
}

class NeedlePromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = test::shared_path("models/stories260K/");
    model_ = load_model(dir + "stories260K.bin");
    tok_ = load_tokenizer(model_, dir + "tok512.bin");
  }
  Model model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(NeedlePromptTest, SpansDecodeToTheirParts) {
  NeedleOptions o;
  o.context_tokens = 150;
  o.depth = 0.5;
  o.needle = passkey_needle(48213);
  o.answer = "The secret passkey is 48213.";
  NeedlePrompt p = build_needle_prompt(*tok_, o);
  EXPECT_LE((int)p.tokens.size(), 150);
  EXPECT_GT((int)p.tokens.size(), 100);
  EXPECT_EQ(p.tokens[0], tok_->bos_id());
  auto text_of = [&](TokenSpan s) {
    return tok_->decode(std::span<const int>(p.tokens).subspan(s.begin, s.size()));
  };
  EXPECT_NE(text_of(p.needle).find("The secret passkey is 48213."), std::string::npos);
  EXPECT_NE(text_of(p.question).find(o.question), std::string::npos);
  EXPECT_EQ(p.answer.end, (int)p.tokens.size());
  EXPECT_NE(text_of(p.answer).find(o.answer), std::string::npos);
  EXPECT_LT(p.needle.end, p.question.begin);
  // The needle sits near the middle of the filler.
  EXPECT_GT(p.needle.begin, 30);
  EXPECT_LT(p.needle.begin, 100);
  // Depth 0 puts it right after BOS, depth 1 right before the question.
  o.depth = 0.0;
  EXPECT_LE(build_needle_prompt(*tok_, o).needle.begin, 1);
  o.depth = 1.0;
  NeedlePrompt last = build_needle_prompt(*tok_, o);
  EXPECT_LE(last.question.begin - last.needle.end, 2);
  // Deterministic.
  EXPECT_EQ(build_needle_prompt(*tok_, o).tokens, last.tokens);
  EXPECT_EQ(passkey_for_seed(3), passkey_for_seed(3));
}

// A SentencePiece .model that removes extra whitespace (tok512.model, as the sentencepiece library
// reads it) drops a leading space from the tokens: the prompt has none, so its spans still map
// onto the text, at every depth.
TEST_F(NeedlePromptTest, SentencePieceModelThatRemovesExtraWhitespace) {
  const std::unique_ptr<Tokenizer> spm =
      load_tokenizer(model_, test::shared_path("models/stories260K/tok512.model"));
  NeedleOptions o;
  o.context_tokens = 150;
  o.needle = passkey_needle(48213);
  o.answer = "The secret passkey is 48213.";
  for (double depth : {0.0, 0.5, 1.0}) {
    o.depth = depth;
    const NeedlePrompt p = build_needle_prompt(*spm, o);
    EXPECT_NE(p.text.front(), ' ') << depth;
    EXPECT_NE(spm->decode(std::span<const int>(p.tokens).subspan(p.needle.begin, p.needle.size())).find("48213"),
              std::string::npos)
        << depth;
  }
}

TEST_F(NeedlePromptTest, BadOptionsAreInputErrors) {
  NeedleOptions o;
  o.depth = 1.5;
  EXPECT_THROW(build_needle_prompt(*tok_, o), InputError);
  o.depth = 0.5;
  o.needle.clear();
  EXPECT_THROW(build_needle_prompt(*tok_, o), InputError);
  RetrievalOptions r;
  r.context_tokens = {model_.config.seq_len + 1};
  EXPECT_THROW(retrieval_scores(model_, *tok_, r), InputError);
  r.context_tokens = {100};
  r.max_steps = 0;
  EXPECT_THROW(retrieval_scores(model_, *tok_, r), InputError);
}

TEST_F(NeedlePromptTest, TrialsRunThroughTheEngine) {
  RetrievalOptions opt;
  opt.context_tokens = {120};
  opt.depths = {0.5};
  opt.max_steps = 8;
  opt.engine.n_threads = 1;
  opt.min_recall = -1.0;  // keep every trial: stories260K cannot answer a passkey question
  RetrievalScores s = retrieval_scores(model_, *tok_, opt);
  EXPECT_EQ(s.n_trials, 1);
  EXPECT_EQ(s.n_kept(), 1);
  ASSERT_EQ(s.trials.size(), (size_t)model_.config.n_layers * model_.config.n_heads);
  for (const auto& list : s.trials) {
    ASSERT_EQ(list.size(), 1u);
    EXPECT_GE(list[0], 0.0f);
    EXPECT_LE(list[0], 8.0f);
  }
  // The default threshold drops trials whose answer misses the needle.
  opt.min_recall = 0.5;
  RetrievalScores strict = retrieval_scores(model_, *tok_, opt);
  EXPECT_EQ(strict.n_trials, 1);
  EXPECT_LE(strict.n_kept(), 1);
}

TEST(RetrievalScoreSmolLM2Test, FindsFewRetrievalHeads) {
  const std::string path = default_model_path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct not in the model cache";
  Model model = load_model(path);
  std::unique_ptr<Tokenizer> tok = load_tokenizer(model, "");
  RetrievalOptions opt;
  opt.context_tokens = {300};
  opt.depths = {0.3};
  opt.max_steps = 16;
  opt.engine.n_threads = 1;
  RetrievalScores s = retrieval_scores(model, *tok, opt);
  ASSERT_EQ(s.n_kept(), 1) << "the model should repeat the needle";
  std::vector<float> m = s.mean();
  const long strong = std::count_if(m.begin(), m.end(), [](float v) { return v > 0.1f; });
  EXPECT_GE(strong, 1);
  EXPECT_LT(strong, (long)m.size() / 10);  // retrieval heads are rare
}

}  // namespace
}  // namespace kvs
