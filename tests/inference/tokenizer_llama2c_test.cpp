// llama2.c tokenizer.bin (tok512): encoding as run.c does it, decoding, byte fallback, token
// display text, and tokenizer discovery / vocabulary checks through load_tokenizer.
#include <gtest/gtest.h>

#include "inference/llama2c_tokenizer.h"
#include "inference/loader.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

std::unique_ptr<SpmTokenizer> tok512() {
  return load_llama2c_tokenizer(shared_model("stories260K/tok512.bin"));
}

TEST(TokenizerLlama2c, EncodesOnceUponATime) {
  const auto tok = tok512();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->kind(), "sentencepiece-bpe");
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("Once upon a time", false), (std::vector<int>{403, 407, 261, 378}));
}

TEST(TokenizerLlama2c, EmptyTextHasNoPrefix) {
  const auto tok = tok512();
  EXPECT_EQ(tok->encode("", true), (std::vector<int>{1}));
  EXPECT_TRUE(tok->encode("", false).empty());
}

TEST(TokenizerLlama2c, EmojiFallsBackToBytes) {
  const auto tok = tok512();
  // "▁" is piece 410; U+1F642 is F0 9F 99 82, byte b is token b + 3.
  EXPECT_EQ(tok->encode("\xF0\x9F\x99\x82", true),
            (std::vector<int>{1, 410, 0xF0 + 3, 0x9F + 3, 0x99 + 3, 0x82 + 3}));
  const std::vector<int> ids = tok->encode("a \xF0\x9F\x99\x82!", true);
  EXPECT_EQ(tok->decode(ids), "a \xF0\x9F\x99\x82!");
}

TEST(TokenizerLlama2c, DecodeRoundTrips) {
  const auto tok = tok512();
  const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "  two leading spaces and trailing  ",
      "Line one.\nLine two!\n\n\"Quoted\" text; 1234567890 (numbers)",
      "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
      "\xF0\x9F\x90\xB6\xF0\x9F\x8E\x89 tabs\tand\tstuff",
  };
  for (const std::string& t : texts) {
    EXPECT_EQ(tok->decode(tok->encode(t, true)), t) << t;
    EXPECT_EQ(tok->decode(tok->encode(t, false)), t) << t;
  }
}

TEST(TokenizerLlama2c, DecodePieceFollowsRunC) {
  const auto tok = tok512();
  EXPECT_EQ(tok->decode_piece(1, 403), "Once");  // space after BOS dropped
  EXPECT_EQ(tok->decode_piece(403, 407), " upon");
  EXPECT_EQ(tok->decode_piece(403, 13), "\n");  // <0x0A>
  EXPECT_EQ(tok->decode_piece(403, 2), "");     // EOS prints nothing
}

TEST(TokenizerLlama2c, TokenText) {
  const auto tok = tok512();
  EXPECT_EQ(tok->token_text(403), " Once");
  EXPECT_EQ(tok->token_text(1), "<s>");
  EXPECT_EQ(tok->token_text(2), "</s>");
  EXPECT_EQ(tok->token_text(0), "<unk>");
  EXPECT_EQ(tok->token_text(13), "\n");   // <0x0A>: the character, as decode gives it
  EXPECT_EQ(tok->token_text(12), "\t");   // <0x09>
  EXPECT_EQ(tok->token_text(3), "\\x00"); // <0x00>: an HDF5 string ends at NUL
  EXPECT_EQ(tok->token_text('A' + 3), "A");
  EXPECT_EQ(tok->token_text(0xF0 + 3), "\\xF0");  // the lead byte of a 4-byte character alone
}

TEST(TokenizerLlama2c, FoundBesideTheCheckpoint) {
  const Model m = load_model(shared_model("stories260K/stories260K.bin"));
  const auto tok = load_tokenizer(m, "");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
}

TEST(TokenizerLlama2c, VocabularyMismatchNamesTheTokenizer) {
  const Model m = load_model(shared_model("fixtures/llama-2-tiny-random.gguf"));
  const std::string tok_path = shared_model("stories260K/tok512.bin");
  const std::string msg = input_error_of([&] { load_tokenizer(m, tok_path); });
  EXPECT_EQ(msg, tok_path + ": vocabulary of 512 tokens does not match the model's 32000");
}

TEST(TokenizerLlama2c, BadTokenizerFiles) {
  TempDir dir;
  const std::string png = dir.file("tok.bin");
  const unsigned char bytes[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
  write_bytes(png, bytes, sizeof bytes);
  EXPECT_EQ(input_error_of([&] {
              load_llama2c_tokenizer(png);
            }).rfind(png + ": not a llama2.c tokenizer", 0),
            0u);

  std::vector<char> tok = testing::read_bytes(shared_model("stories260K/tok512.bin"));
  ASSERT_EQ(tok.size(), 6227u);
  tok.resize(6224);
  const std::string cut = dir.file("cut.bin");
  write_bytes(cut, tok);
  const std::string msg = input_error_of([&] { load_llama2c_tokenizer(cut); });
  EXPECT_EQ(msg.rfind(cut + ": truncated file (token 511", 0), 0u) << msg;
}

}  // namespace
}  // namespace kvs
