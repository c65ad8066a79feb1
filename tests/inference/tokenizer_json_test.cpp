// tokenizer.json: stories260K-hf's SentencePiece-style BPE agrees with tok512.bin (normalizer and
// Metaspace variants; Gemma's Split at spaces), and hand-built byte-level files for the GPT-2, Llama-3, Qwen2 and SmolLM
// pre-tokenizers split digits, contractions and whitespace runs as each family does.
#include "inference/tokenizer_json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "inference/llama2c_tokenizer.h"
#include "inference/loader.h"
#include "inference/pretokenizer.h"
#include "inference/tokenizer_bpe.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

const std::vector<std::string> kTexts = {
    "Once upon a time",
    "The little dog's ball was red.",
    "  leading and   inner spaces ",
    "Lily said, \"Let's play!\"\nTom said no.",
    "1234567890 numbers 42",
    "\xF0\x9F\x99\x82 emoji \xF0\x9F\x90\xB6\xF0\x9F\x8E\x89",
    "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E text",
    "tabs\tand\nnewlines\n\n",
    "ZZZ qqq xyzzy",
};

// A tokenizer.json's text with its normalizer object replaced by `normalizer` (JSON text).
std::string with_normalizer(std::string text, const std::string& normalizer) {
  const std::size_t start = text.find("{", text.find("\"normalizer\""));
  std::size_t end = start;
  for (int depth = 0; end < text.size(); ++end) {
    depth += text[end] == '{' ? 1 : text[end] == '}' ? -1 : 0;
    if (depth == 0) break;
  }
  return text.replace(start, end + 1 - start, normalizer);
}

TEST(TokenizerJson, Stories260KMatchesTok512) {
  const std::string path = shared_model("stories260K-hf/tokenizer.json");
  const auto json = load_tokenizer_json(path);
  const auto bin = load_llama2c_tokenizer(shared_model("stories260K/tok512.bin"));
  EXPECT_EQ(json->kind(), "sentencepiece-bpe");
  EXPECT_EQ(json->vocab_size(), 512);
  EXPECT_EQ(json->bos_id(), 1);
  EXPECT_EQ(json->eos_id(), 2);
  EXPECT_TRUE(json->add_bos());
  for (const std::string& t : kTexts) {
    EXPECT_EQ(json->encode(t, true), bin->encode(t, true)) << t;
    EXPECT_EQ(json->decode(json->encode(t, true)), t) << t;
  }
  EXPECT_EQ(json->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
}

// A Unicode form among a SentencePiece-style file's normalizer steps is applied before them: with
// NFKC first, the ligature "ﬁ" (U+FB01) and a decomposed "é" tokenize as "fi" and U+00E9 do.
TEST(TokenizerJson, SentencePieceNormalizerWithAUnicodeForm) {
  const std::vector<char> raw = testing::read_bytes(shared_model("stories260K-hf/tokenizer.json"));
  std::string text(raw.begin(), raw.end());
  const std::string steps = "\"normalizers\": [";
  text.insert(text.find(steps) + steps.size(), "{\"type\": \"NFKC\"}, ");
  TempDir dir;
  write_bytes(dir.file("tokenizer.json"), text.data(), text.size());
  const auto nfkc = load_tokenizer_json(dir.file("tokenizer.json"));
  const auto plain = load_tokenizer_json(shared_model("stories260K-hf/tokenizer.json"));
  const std::string odd = "\xEF\xAC\x81sh caf" "e\xCC\x81", canonical = "fish caf\xC3\xA9";
  EXPECT_NE(plain->encode(odd, true), plain->encode(canonical, true));
  EXPECT_EQ(nfkc->encode(odd, true), plain->encode(canonical, true));
  for (const std::string& t : kTexts) EXPECT_EQ(nfkc->encode(t, true), plain->encode(t, true)) << t;  // already NFKC
}

TEST(TokenizerJson, MetaspaceVariantMatches) {
  const std::vector<char> raw = testing::read_bytes(shared_model("stories260K-hf/tokenizer.json"));
  std::string text(raw.begin(), raw.end());
  // Replace the normalizer object by null and the pre-tokenizer by Metaspace.
  text = with_normalizer(text, "null");
  const std::string pre = "\"pre_tokenizer\": null";
  text.replace(text.find(pre), pre.size(),
               "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
               "\"prepend_scheme\": \"first\", \"split\": false}");
  TempDir dir;
  write_bytes(dir.file("tokenizer.json"), text.data(), text.size());
  const auto meta = load_tokenizer_json(dir.file("tokenizer.json"));
  const auto bin = load_llama2c_tokenizer(shared_model("stories260K/tok512.bin"));
  for (const std::string& t : kTexts) EXPECT_EQ(meta->encode(t, false), bin->encode(t, false)) << t;
  // "first": text after a special token gets no "▁" (403 is "▁Once").
  const std::vector<int> after = meta->encode("</s>Once", false);
  EXPECT_EQ(after.front(), 2);
  EXPECT_NE(after[1], 403);
  EXPECT_EQ(meta->decode(after), "Once");

  // "always" with split: each "▁word" is merged on its own; same ids for this vocabulary.
  const std::string first = "\"prepend_scheme\": \"first\", \"split\": false";
  text.replace(text.find(first), first.size(), "\"prepend_scheme\": \"always\", \"split\": true");
  write_bytes(dir.file("tokenizer.json"), text.data(), text.size());
  const auto split = load_tokenizer_json(dir.file("tokenizer.json"));
  for (const std::string& t : kTexts)
    EXPECT_EQ(split->encode(t, false), bin->encode(t, false)) << t;
  EXPECT_EQ(split->encode("</s>Once", false), (std::vector<int>{2, 403}));
}

// Gemma's tokenizer.json: spaces replaced by "▁" without a prepended one, then a Split at literal
// spaces (merged with the previous piece), which finds none left: the same ids as without it. A
// Split at anything else, or at spaces the normalizer keeps, is refused.
TEST(TokenizerJson, GemmaSplitAtSpacesAfterTheReplaceSplitsNothing) {
  const std::vector<char> raw = testing::read_bytes(shared_model("stories260K-hf/tokenizer.json"));
  std::string text(raw.begin(), raw.end());
  text = with_normalizer(
      text, "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}");
  TempDir dir;
  write_bytes(dir.file("plain.json"), text.data(), text.size());
  const std::string pre = "\"pre_tokenizer\": null";
  const std::size_t at = text.find(pre);
  const auto with_split = [&](const std::string& split) {
    std::string t = text;
    t.replace(at, pre.size(), "\"pre_tokenizer\": " + split);
    write_bytes(dir.file("split.json"), t.data(), t.size());
    return dir.file("split.json");
  };
  const auto plain = load_tokenizer_json(dir.file("plain.json"));
  const auto gemma = load_tokenizer_json(with_split(
      "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithPrevious\", \"invert\": false}"));
  for (const std::string& t : kTexts) EXPECT_EQ(gemma->encode(t, true), plain->encode(t, true)) << t;
  EXPECT_NE(plain->encode("Once upon", false).front(), 403);  // no "▁" prepended: not "▁Once"
  const std::string other = with_split("{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"Isolated\"}");
  EXPECT_EQ(input_error_of([&] { load_tokenizer_json(other); }),
            other + ": unsupported pre-tokenizer \"Split\" for a byte-fallback BPE model");
}

TEST(TokenizerJson, FoundInTheModelFolder) {
  const Model m = load_model(shared_model("stories260K-hf"));
  const auto tok = load_tokenizer(m, "");
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  const Model tiny = load_model(shared_model("fixtures/llama-2-tiny-random.gguf"));
  const std::string path = shared_model("stories260K-hf/tokenizer.json");
  EXPECT_EQ(input_error_of([&] { load_tokenizer(tiny, path); }),
            path + ": vocabulary of 512 tokens does not match the model's 32000");
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// A byte-level tokenizer.json: the 256 byte symbols, a few merges, two special tokens.
class ByteLevelJson {
 public:
  ByteLevelJson() {
    for (int b = 0; b < 256; ++b) add(byte_to_unicode(static_cast<unsigned char>(b)));
    const std::string G = byte_to_unicode(' '), C = byte_to_unicode('\n');
    for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{{"1", "2"},
                                                                               {"12", "3"},
                                                                               {"123", "4"},
                                                                               {"1234", "5"},
                                                                               {"4", "5"},
                                                                               {"'", "M"},
                                                                               {G, G},
                                                                               {G + G, C},
                                                                               {G + G + C, C}}) {
      merges_.push_back(
          std::string("\"").append(json_escape(a)).append(" ").append(json_escape(b)).append("\""));
      add(a + b);
    }
  }
  int id(const std::string& token) const { return ids_.at(token); }
  int im_start_id() const { return static_cast<int>(ids_.size()); }  // first added token

  // extra_special: a third special token (id im_start_id() + 2) when not empty.
  std::string write(const TempDir& dir, const std::string& pre_tokenizer, bool with_bos,
                    const std::string& normalizer = "null", const std::string& extra_special = "") const {
    const int n = static_cast<int>(ids_.size());
    std::string vocab;
    for (const auto& [token, id] : ids_) {
      vocab.append(vocab.empty() ? "\"" : ", \"").append(json_escape(token)).append("\": ");
      vocab.append(std::to_string(id));
    }
    std::string merges;
    for (const std::string& m : merges_) merges += (merges.empty() ? "" : ", ") + m;
    const std::string post =
        with_bos ? "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                   "{\"id\": \"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": "
                   "{\"id\": \"A\", \"type_id\": 0}}]}"
                 : "null";
    const std::string text =
        "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": " + std::to_string(n) +
        ", \"content\": \"<|im_start|>\", \"special\": true}, {\"id\": " + std::to_string(n + 1) +
        ", \"content\": \"<|begin_of_text|>\", \"special\": true}" +
        (extra_special.empty() ? "" : ", {\"id\": " + std::to_string(n + 2) + ", \"content\": \"" + extra_special +
                                          "\", \"special\": true}") +
        "], \"normalizer\": " + normalizer + ", "
        "\"pre_tokenizer\": " +
        pre_tokenizer + ", \"post_processor\": " + post +
        ", \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {" +
        vocab + "}, \"merges\": [" + merges + "]}}";
    const std::string path = dir.file("tokenizer.json");
    write_bytes(path, text.data(), text.size());
    return path;
  }

 private:
  void add(const std::string& token) { ids_.emplace(token, static_cast<int>(ids_.size())); }
  std::map<std::string, int> ids_;
  std::vector<std::string> merges_;
};

std::string split_pre(const char* pattern) {
  return "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"" +
         json_escape(pattern) +
         "\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": "
         "\"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}";
}

const std::string kGpt2Pre =
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}";
const std::string kSmolPre =
    "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
    "\"individual_digits\": true}, " +
    kGpt2Pre + "]}";

struct Family {
  std::string name, pre;
};

TEST(TokenizerJson, ByteLevelFamilies) {
  const ByteLevelJson v;
  const std::string G = byte_to_unicode(' '), C = byte_to_unicode('\n');
  const std::vector<int> digits_whole = {v.id("12345")};
  const std::vector<int> digits_3_2 = {v.id("123"), v.id("45")};
  const std::vector<int> digits_single = {v.id("1"), v.id("2"), v.id("3"), v.id("4"), v.id("5")};
  const std::vector<int> contraction_split = {v.id("I"), v.id("'"), v.id("M")};
  const std::vector<int> contraction_whole = {v.id("I"), v.id("'M")};
  // "a  \n\nb": GPT-2 gives "a" "  \n" "\n" "b"; Llama-3/Qwen2 give "a" "  \n\n" "b".
  const std::vector<int> ws_gpt2 = {v.id("a"), v.id(G + G + C), v.id(C), v.id("b")};
  const std::vector<int> ws_llama3 = {v.id("a"), v.id(G + G + C + C), v.id("b")};
  struct Case {
    Family family;
    std::vector<int> digits, contraction, whitespace;
  };
  const std::vector<Case> cases = {
      {{"gpt2", kGpt2Pre}, digits_whole, contraction_split, ws_gpt2},
      {{"llama3", split_pre(kLlama3Pattern)}, digits_3_2, contraction_whole, ws_llama3},
      {{"qwen2", split_pre(kQwen2Pattern)}, digits_single, contraction_whole, ws_llama3},
      {{"smollm", kSmolPre}, digits_single, contraction_split, ws_gpt2},
  };
  for (const Case& c : cases) {
    TempDir dir;
    const auto tok = load_tokenizer_json(v.write(dir, c.family.pre, c.family.name == "llama3"));
    EXPECT_EQ(tok->kind(), "byte-level-bpe/" + c.family.name);
    EXPECT_EQ(tok->encode("12345", false), c.digits) << c.family.name;
    EXPECT_EQ(tok->encode("I'M", false), c.contraction) << c.family.name;
    EXPECT_EQ(tok->encode("a  \n\nb", false), c.whitespace) << c.family.name;
    // Special tokens are matched before pre-tokenization.
    const std::vector<int> chat = tok->encode("<|im_start|>12345", false);
    EXPECT_EQ(chat.front(), v.im_start_id()) << c.family.name;
    for (const std::string t :
         {"\xF0\x9F\x99\x82 ok!\n", "x  y\t\tz", "caf\xC3\xA9 \xE6\x97\xA5 99 bottles"}) {
      EXPECT_EQ(tok->decode(tok->encode(t, false)), t) << c.family.name;
    }
    EXPECT_EQ(tok->add_bos(), c.family.name == "llama3");
    if (c.family.name == "llama3") {
      EXPECT_EQ(tok->encode("1", true).front(), tok->bos_id());
    }
  }
}

// An end-of-turn marker ends a text where the vocabulary holds it as a token of its own (a Llama-3
// GGUF converted before its end-of-turn id was recorded ran past "<|eot_id|>"); spelled in bytes,
// as "<|im_end|>" is in this vocabulary, it is no token of its own.
TEST(TokenizerJson, AnEndOfTurnMarkerEndsTheText) {
  const ByteLevelJson v;
  TempDir dir;
  const auto tok = load_tokenizer_json(v.write(dir, split_pre(kLlama3Pattern), true, "null", "<|eot_id|>"));
  const int bos = tok->bos_id(), eot = v.im_start_id() + 2;
  EXPECT_EQ(tok->encode("<|eot_id|>", false), std::vector<int>{eot});
  EXPECT_EQ(tok->encode("<|im_end|>", false).size(), 10u);
  EXPECT_EQ(text_end_ids(std::vector<int>{}, *tok), (std::vector<int>{bos, eot}));
  EXPECT_EQ(text_end_ids(std::vector<int>{7, 7}, *tok), (std::vector<int>{7, bos, eot}));
  const auto plain = load_tokenizer_json(v.write(dir, split_pre(kLlama3Pattern), true));
  EXPECT_EQ(text_end_ids(std::vector<int>{}, *plain), std::vector<int>{bos});
}

// DeepSeek's tokenizer.json gives its normalizer as an empty Sequence: no normalization.
TEST(TokenizerJson, AnEmptyNormalizerSequenceIsNone) {
  const ByteLevelJson v;
  TempDir a, b;
  const auto none = load_tokenizer_json(v.write(a, kGpt2Pre, false));
  const auto empty =
      load_tokenizer_json(v.write(b, kGpt2Pre, false, "{\"type\": \"Sequence\", \"normalizers\": []}"));
  for (const std::string t : {"caf\xC3\xA9 e\xCC\x81 12345", "a  \n\nb"})
    EXPECT_EQ(empty->encode(t, false), none->encode(t, false));
}

// Without a tokenizer_config.json, EOS is guessed by name among the added tokens only: Qwen2's
// vocabulary holds an ordinary "</s>" (128247), which was taken for the end of text.
TEST(TokenizerJson, EosIsGuessedAmongTheAddedTokensOnly) {
  const ByteLevelJson v;
  TempDir dir;
  const std::string path = v.write(dir, kGpt2Pre, false, "null", "<|endoftext|>");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  // "</s>" as an ordinary vocabulary entry, at the id past the added tokens.
  const std::string vocab_key = "\"vocab\": {";
  text.insert(text.find(vocab_key) + vocab_key.size(), "\"</s>\": " + std::to_string(v.im_start_id() + 3) + ", ");
  write_bytes(path, text.data(), text.size());
  EXPECT_EQ(load_tokenizer_json(path)->eos_id(), v.im_start_id() + 2);
}

// Qwen2's {"type": "NFC"} (and the other forms): text between special tokens is normalized before
// it is split, so a decomposed "e" + U+0301 and a precomposed U+00E9 give the same tokens.
TEST(TokenizerJson, ByteLevelNormalizers) {
  const ByteLevelJson v;
  const std::string composed = "caf\xC3\xA9 \xEF\xAC\x81", decomposed = "cafe\xCC\x81 \xEF\xAC\x81";  // + "ﬁ"
  TempDir none_dir, nfc_dir, nfd_dir, nfkc_dir, seq_dir;
  const auto none = load_tokenizer_json(v.write(none_dir, split_pre(kQwen2Pattern), false));
  const auto nfc = load_tokenizer_json(v.write(nfc_dir, split_pre(kQwen2Pattern), false, "{\"type\": \"NFC\"}"));
  const auto nfd = load_tokenizer_json(v.write(nfd_dir, split_pre(kQwen2Pattern), false, "{\"type\": \"NFD\"}"));
  const auto nfkc = load_tokenizer_json(v.write(nfkc_dir, split_pre(kQwen2Pattern), false, "{\"type\": \"NFKC\"}"));
  const auto seq = load_tokenizer_json(v.write(seq_dir, split_pre(kQwen2Pattern), false,
                                               "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}]}"));
  EXPECT_NE(none->encode(decomposed, false), none->encode(composed, false));
  EXPECT_EQ(nfc->encode(decomposed, false), none->encode(composed, false));
  EXPECT_EQ(seq->encode(decomposed, false), none->encode(composed, false));
  EXPECT_EQ(nfd->encode(composed, false), none->encode(decomposed, false));
  EXPECT_EQ(nfkc->encode(decomposed, false), none->encode("caf\xC3\xA9 fi", false));  // the ligature too
  // Special tokens are matched on the text as written, then the text around them normalized.
  const std::vector<int> chat = nfc->encode("<|im_start|>" + decomposed, false);
  EXPECT_EQ(chat.front(), v.im_start_id());
  EXPECT_EQ(std::vector<int>(chat.begin() + 1, chat.end()), none->encode(composed, false));
  // Bytes that are not UTF-8 are encoded as they are.
  EXPECT_EQ(nfc->decode(nfc->encode("a\xFF\xFE" "b", false)), "a\xFF\xFE" "b");
}

TEST(TokenizerJson, BadFiles) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.json");
  const std::string unigram = "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}";
  write_bytes(path, unigram.data(), unigram.size());
  EXPECT_EQ(input_error_of([&] { load_tokenizer_json(path); }),
            path + ": unsupported tokenizer model \"Unigram\" (supported: BPE)");
  const std::string broken = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}}}";
  write_bytes(path, broken.data(), broken.size());
  EXPECT_EQ(input_error_of([&] {
              load_tokenizer_json(path);
            }).rfind(path + ": invalid JSON at line 1", 0),
            0u);
  const std::string bad_pre =
      "{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"decoder\": {\"type\": \"ByteLevel\"}, "
      "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
  write_bytes(path, bad_pre.data(), bad_pre.size());
  EXPECT_EQ(input_error_of([&] { load_tokenizer_json(path); }),
            path + ": unsupported pre-tokenizer \"Whitespace\"");
}

// Hugging Face's tokenizers refuses these too: a BPE model without its merges list, and merges
// of (or into) tokens that are not in the vocabulary. An empty list is fine.
TEST(TokenizerJson, MergesMustBeThereAndNameVocabularyTokens) {
  TempDir dir;
  const std::string path = dir.file("tokenizer.json");
  const auto load_with = [&](const std::string& merges) {
    const std::string text = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}" +
                             merges + "}}";
    write_bytes(path, text.data(), text.size());
    return load_tokenizer_json(path);
  };
  const auto error_with = [&](const std::string& merges) { return input_error_of([&] { load_with(merges); }); };
  const std::string missing = ": model.merges is missing (a BPE model needs the list, [] when it has none)";
  EXPECT_EQ(error_with(""), path + missing);
  EXPECT_EQ(error_with(", \"merges\": null"), path + missing);
  EXPECT_EQ(error_with(", \"merges\": \"a b\""), path + ": model.merges is not a list");
  EXPECT_EQ(error_with(", \"merges\": [\"a b\", \"x b\"]"),
            path + ": merge \"x b\" names \"x\", which is not in model.vocab");
  EXPECT_EQ(error_with(", \"merges\": [[\"a\", \"y\"]]"),
            path + ": merge \"a y\" names \"y\", which is not in model.vocab");
  EXPECT_EQ(error_with(", \"merges\": [\"b a\"]"),
            path + ": merge \"b a\" makes \"ba\", which is not in model.vocab");
  EXPECT_EQ(load_with(", \"merges\": []")->vocab_size(), 3);
  EXPECT_EQ(load_with(", \"merges\": [\"a b\"]")->encode("ab", false), (std::vector<int>{2}));
  // No merges, no merging (as tokenizers 0.23 encodes it: [0, 1]), although "ab" is in the vocabulary.
  EXPECT_EQ(load_with(", \"merges\": []")->encode("ab", false), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace kvs
