// SentencePiece .model files: tok512.model and the stories260K HF folder's tokenizer.model read
// into the same vocabulary as llama2.c's tok512.bin, encode as the sentencepiece library does
// (its ids, below, were produced by sentencepiece 0.2's SentencePieceProcessor.encode on these
// files), serve an HF folder without tokenizer.json, and refuse what they cannot read.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "inference/llama2c_tokenizer.h"
#include "inference/loader.h"
#include "inference/sentencepiece_model.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::read_bytes;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

TEST(TokenizerSentencePiece, SameVocabularyAsTheLlama2cExport) {
  const auto model = load_sentencepiece_model(shared_model("stories260K/tok512.model"));
  const auto bin = load_llama2c_tokenizer(shared_model("stories260K/tok512.bin"));
  ASSERT_EQ(model->vocab_size(), 512);
  EXPECT_EQ(model->vocab().pieces, bin->vocab().pieces);
  EXPECT_EQ(model->vocab().scores, bin->vocab().scores);
  EXPECT_EQ(model->vocab().types, bin->vocab().types);
  EXPECT_EQ(model->bos_id(), 1);
  EXPECT_EQ(model->eos_id(), 2);
  EXPECT_TRUE(model->add_bos());
}

TEST(TokenizerSentencePiece, EncodesAsTheSentencePieceLibrary) {
  for (const char* file : {"stories260K/tok512.model", "stories260K-hf/tokenizer.model"}) {
    SCOPED_TRACE(file);
    const auto tok = load_sentencepiece_model(shared_model(file));
    EXPECT_EQ(tok->encode("Once upon a time", false), (std::vector<int>{403, 407, 261, 378}));
    // remove_extra_whitespaces: no leading or trailing spaces, runs of spaces become one
    EXPECT_EQ(tok->encode("  Hello   world  ", false), (std::vector<int>{346, 306, 414, 263, 304, 341}));
    EXPECT_EQ(tok->encode("na\xC3\xAFve caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xE2\x85\xA3", false),
              (std::vector<int>{297, 412, 198, 178, 360, 280, 412, 431, 485, 410, 233, 154, 168, 233, 159, 175, 410,
                                229, 136, 166}));
    EXPECT_EQ(tok->encode("a\tb\nc", false), (std::vector<int>{261, 12, 430, 13, 429}));
    EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
    EXPECT_TRUE(tok->encode("   ", false).empty());
    // A "▁" (U+2581) typed at the end is trimmed with the spaces, as sentencepiece trims it.
    EXPECT_TRUE(tok->encode("\xE2\x96\x81", false).empty());
    EXPECT_EQ(tok->encode("x\xE2\x96\x81 ", false), tok->encode("x", false));
    // Control tokens' text is characters, not BOS / EOS (nor is the unknown token's).
    EXPECT_EQ(tok->encode("<s> literal bos </s>", true),
              (std::vector<int>{1, 410, 504, 419, 505, 278, 275, 285, 412, 421, 268, 414, 419, 410, 504, 492, 419, 505}));
    EXPECT_EQ(tok->encode("a<unk>b", false), (std::vector<int>{261, 504, 379, 433, 505, 430}));
  }
}

// Token texts (/tokens/text) are the decoded bytes: a newline byte token is a newline, "▁" a
// space; only a byte that is part of a split multi-byte character is "\xNN".
TEST(TokenizerSentencePiece, TokenTextIsTheDecodedBytes) {
  const auto tok = load_sentencepiece_model(shared_model("stories260K/tok512.model"));
  EXPECT_EQ(tok->token_text(13), "\n");
  EXPECT_EQ(tok->token_text(403), " Once");
  const std::vector<int> ids = tok->encode("\xE6\x97\xA5", false);  // 日: three byte tokens
  ASSERT_EQ(ids.size(), 4u);  // "▁" first
  EXPECT_EQ(tok->token_text(ids[1]), "\\xE6");
  EXPECT_EQ(tok->token_text(ids[3]), "\\xA5");
}

TEST(TokenizerSentencePiece, ServesAnHfFolderWithoutTokenizerJson) {
  TempDir dir;
  namespace fs = std::filesystem;
  const fs::path src = shared_model("stories260K-hf");
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.model"})
    fs::copy_file(src / name, fs::path(dir.file(name)));
  const Model model = load_model(dir.file(""));
  const auto tok = load_tokenizer(model, "");
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  fs::remove(dir.file("tokenizer.model"));
  const std::string err = input_error_of([&] { load_tokenizer(model, ""); });
  EXPECT_NE(err.find("no tokenizer.json or tokenizer.model in the model folder; pass --tokenizer"), std::string::npos)
      << err;
}

// Protobuf bytes: a varint, and field `f` with wire type 0 (varint) or 2 (bytes).
std::string varint(uint64_t v) {
  std::string s;
  do {
    s += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  return s;
}
std::string field_varint(int f, uint64_t v) { return varint(static_cast<uint64_t>(f) << 3) + varint(v); }
std::string field_bytes(int f, const std::string& b) { return varint((static_cast<uint64_t>(f) << 3) | 2) + varint(b.size()) + b; }
std::string piece(const std::string& text, float score, int type) {
  std::string s = field_bytes(1, text) + varint((2 << 3) | 5);
  char f[4];
  std::memcpy(f, &score, 4);
  return s + std::string(f, 4) + field_varint(3, type);
}

TEST(TokenizerSentencePiece, BadFilesAreOneLineInputErrors) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.model");
  auto error_for = [&](const std::string& bytes) {
    write_bytes(path, bytes.data(), bytes.size());
    return input_error_of([&] { load_sentencepiece_model(path); });
  };
  const std::string pieces = field_bytes(1, piece("<unk>", 0, 2)) + field_bytes(1, piece("<s>", 0, 3)) +
                             field_bytes(1, piece("</s>", 0, 3)) + field_bytes(1, piece("a", -1, 1));
  const std::string bpe = field_bytes(2, field_varint(3, 2));
  EXPECT_EQ(load_sentencepiece_model((write_bytes(path, (pieces + bpe).data(), pieces.size() + bpe.size()), path))
                ->vocab_size(),
            4);

  std::vector<char> real = read_bytes(shared_model("stories260K/tok512.model"));
  EXPECT_EQ(error_for(std::string(real.begin(), real.begin() + real.size() / 2)),
            path + ": not a SentencePiece model (ModelProto has a 15-byte field that runs past its end)")
      << "truncated";
  const std::vector<char> other = read_bytes(shared_model("stories260K/tok512.bin"));
  EXPECT_NE(error_for(std::string(other.begin(), other.end())).find(path + ": not a SentencePiece model ("),
            std::string::npos)
      << "a llama2.c tokenizer.bin";
  EXPECT_EQ(error_for(pieces), path + ": SentencePiece model type 1 (1 unigram, 3 word, 4 char) is not supported; "
                                      "BPE (2) only");
  EXPECT_EQ(error_for(bpe), path + ": not a SentencePiece model (ModelProto holds no pieces)");
  EXPECT_EQ(error_for(pieces + bpe + field_bytes(3, field_bytes(1, "nfkc_cf"))),
            path + ": SentencePiece normalization \"nfkc_cf\" is not supported (identity, nfkc, nmt_nfkc)");
  EXPECT_EQ(error_for(pieces + field_bytes(2, field_varint(3, 2) + field_varint(41, 7))),
            path + ": SentencePiece bos_id 7 is past the vocabulary of 4");
  EXPECT_EQ(error_for(pieces + bpe + field_bytes(1, piece("b", 0, 9))),
            path + ": not a SentencePiece model (piece 4 has type 9)");
}

}  // namespace
}  // namespace kvs
