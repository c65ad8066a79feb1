// End-to-end tests of `kvscope tokenize` on the test models (llama2.c .bin, GGUF, HF folder) and on
// tokenizer files alone: the ids a recording of the same prompt stores, ids from independent
// references, --chat, --no-bos, several texts, the text and --json forms, and the bad-input answers.
#include <gtest/gtest.h>

#include "analysis/trace.h"
#include "cli_util.h"
#include "inference/json.h"
#include "inference/loader.h"
#include "tests/inference/gguf_writer.h"

namespace kvs::cli_test {
namespace {

// The one JSON line of a tokenize --json run of one text.
Json parse_json(const CliResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  return Json::parse(r.out, "kvscope tokenize --json");
}

std::vector<int> ids_of(const Json& j) {
  std::vector<int> ids;
  if (const Json* a = j.find("ids"))
    for (const Json& v : a->items()) ids.push_back(static_cast<int>(v.as_number()));
  return ids;
}

std::vector<std::string> strings_of(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (const Json* a = j.find(key))
    for (const Json& v : a->items()) out.push_back(v.as_string());
  return out;
}

std::vector<int> tokenize_ids(std::vector<std::string> args) {
  args.insert(args.begin(), "tokenize");
  args.push_back("--json");
  return ids_of(parse_json(run_kvscope(args)));
}

// The prompt's ids a recording of `model` stores (/tokens/ids, its first prompt_len entries).
std::vector<int> recorded_prompt_ids(const std::string& model, const std::string& prompt,
                                     const std::vector<std::string>& extra = {}) {
  TempDir out;
  std::vector<std::string> args{"record", "--model",        model,     "--prompt",  prompt, "--steps", "1",
                                "--out",  out.file("t.h5"), "--quiet", "--threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_kvscope(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  const TraceReader trace(out.file("t.h5"));
  const std::vector<int32_t> ids = trace.token_ids();
  return {ids.begin(), ids.begin() + trace.meta().prompt_len};
}

// SOURCES.md: "Once upon a time" encodes (with BOS) to these with stories260K's tokenizer.
const std::vector<int> kOnceUponATime = {1, 403, 407, 261, 378};

TEST(CliTokenize, StoriesBinIdsAreTheRecordedPrompt) {
  EXPECT_EQ(tokenize_ids({stories_bin(), "--text", "Once upon a time"}), kOnceUponATime);
  // A prompt with what tok512 holds as byte tokens (é, 🙂) and a newline: what record stores.
  const std::string prompt = "The café\nsaid 🙂 \"hi\"  42";
  const std::vector<int> ids = tokenize_ids({stories_bin(), "--text", prompt});
  EXPECT_EQ(ids, recorded_prompt_ids(stories_bin(), prompt));
  EXPECT_GT(ids.size(), 12u);
  EXPECT_EQ(ids[0], 1);
}

TEST(CliTokenize, TextForm) {
  const CliResult r = run_kvscope({"tokenize", stories_bin(), "--text", "Once upon a time"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "0    1  <s>\n"
            "1  403  \" Once\"\n"
            "2  407  \" upon\"\n"
            "3  261  \" a\"\n"
            "4  378  \" time\"\n"
            "5 tokens (sentencepiece-bpe, 512 in its vocabulary, BOS added)\n");
}

// Quotes, backslashes, tabs and newlines are escaped; a byte token that is half a character shows
// its byte as \xNN. Llama-2's vocabulary (the GGUF fixture) holds no token for the llama emoji.
TEST(CliTokenize, TextFormEscapes) {
  const CliResult r = run_kvscope({"tokenize", tiny_random_gguf(), "--no-bos", "--text", "\"a\\b\"\t\n🦙"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  \"\\\"\"\n"), std::string::npos) << r.out;  // the quote
  EXPECT_NE(r.out.find("  \"\\\\\"\n"), std::string::npos) << r.out;  // the backslash
  EXPECT_NE(r.out.find("  \"\\t\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  \"\\n\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  243  \"\\xF0\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  156  \"\\x99\"\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(sentencepiece-bpe, 32000 in its vocabulary)\n"), std::string::npos) << r.out;
}

// The Llama-2 vocabulary of the GGUF fixture gives the ids llama.cpp's tokenizer test expects of
// ggml-vocab-llama-spm.gguf (models/ggml-vocab-llama-spm.gguf.out in llama.cpp, made with
// Meta's tokenizer), after the BOS that record adds; and those are what a recording stores.
TEST(CliTokenize, GgufFixtureMatchesLlamaCppExpectedIds) {
  const std::string m = tiny_random_gguf();
  EXPECT_EQ(tokenize_ids({m, "--text", "ied 4 ½ months"}),
            (std::vector<int>{1, 474, 287, 29871, 29946, 29871, 30226, 7378}));
  EXPECT_EQ(tokenize_ids({m, "--text", " this is 🦙.cpp"}),
            (std::vector<int>{1, 29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223}));
  EXPECT_EQ(tokenize_ids({m, "--text", "Cửa Việt"}),
            (std::vector<int>{1, 315, 228, 190, 176, 29874, 10630, 30529, 29873}));
  EXPECT_EQ(tokenize_ids({m, "--text", "    Hello\n    Hello"}), (std::vector<int>{1, 268, 15043, 13, 1678, 15043}));
  EXPECT_EQ(tokenize_ids({m, "--text", "\t\n"}), (std::vector<int>{1, 29871, 12, 13}));
  const std::string prompt = " this is 🦙.cpp";
  EXPECT_EQ(tokenize_ids({m, "--text", prompt}), recorded_prompt_ids(m, prompt));
  // --no-bos: llama.cpp's ids as they are
  EXPECT_EQ(tokenize_ids({m, "--no-bos", "--text", "Hello world"}), (std::vector<int>{15043, 3186}));
}

// stories260K-hf holds the same vocabulary as tokenizer.json (and tokenizer.model): the same ids
// as the llama2.c tokenizer, and the ids its recording stores.
TEST(CliTokenize, HuggingFaceFolder) {
  const std::string folder = shared("stories260K-hf");
  const Json j = parse_json(run_kvscope({"tokenize", folder, "--text", "Once upon a time", "--json"}));
  EXPECT_EQ(ids_of(j), kOnceUponATime);
  EXPECT_EQ(strings_of(j, "pieces"), (std::vector<std::string>{"<s>", " Once", " upon", " a", " time"}));
  const std::string prompt = "Lily's dog, Max, ran 3 miles!\n\"Wow,\" she said.";
  const std::vector<int> ids = tokenize_ids({folder, "--text", prompt});
  EXPECT_EQ(ids, tokenize_ids({stories_bin(), "--text", prompt}));
  EXPECT_EQ(ids, recorded_prompt_ids(folder, prompt));
}

TEST(CliTokenize, TokenizerFilesAlone) {
  const std::string prompt = "Once upon a time";
  for (const std::string& t : {tok512(), shared("stories260K/tok512.model"), shared("stories260K-hf/tokenizer.json"),
                               shared("stories260K-hf"), stories_gguf()}) {
    SCOPED_TRACE(t);
    EXPECT_EQ(tokenize_ids({"--tokenizer", t, "--text", prompt}), kOnceUponATime);
  }
  // A model with another tokenizer of the same vocabulary size: that one encodes, as in record.
  EXPECT_EQ(tokenize_ids({stories_bin(), "--tokenizer", shared("stories260K/tok512.model"), "--text", prompt}),
            kOnceUponATime);
}

// A vocab-only GGUF (tokenizer metadata, no tensors; llama.cpp's ggml-vocab-*.gguf are such) is a
// tokenizer, not a model; its chat template serves --chat.
std::string write_vocab_gguf(const std::string& path, const std::string& chat_template) {
  testing::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"});
  w.add_f32s("tokenizer.ggml.scores", {0, 0, 0, -5, -6, -7, -1, -2, -0.5f});
  w.add_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1});
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  if (!chat_template.empty()) w.add_string("tokenizer.chat_template", chat_template);
  w.write(path);
  return path;
}

TEST(CliTokenize, VocabOnlyGguf) {
  TempDir in;
  const std::string vocab = write_vocab_gguf(in.file("vocab.gguf"), "{{ '[INST] ' + message['content'] + ' [/INST]' }}");
  const Json j = parse_json(run_kvscope({"tokenize", "--tokenizer", vocab, "--text", "ab a", "--json"}));
  EXPECT_EQ(ids_of(j), (std::vector<int>{1, 8, 6}));  // <s> ▁ab ▁a
  EXPECT_EQ(strings_of(j, "pieces"), (std::vector<std::string>{"<s>", " ab", " a"}));
  EXPECT_EQ(j.get_number("vocab_size", 0), 9);
  // As the model it is refused, naming the file.
  const CliResult r = run_kvscope({"tokenize", vocab, "--text", "ab"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("kvscope: " + vocab + ": ", 0), 0u) << r.err;
  // --chat: the template names [INST] without <<SYS>>: Mistral's format, "[INST] " + text + " [/INST]".
  const Json chat = parse_json(run_kvscope({"tokenize", "--tokenizer", vocab, "--chat", "--text", "ab", "--json"}));
  EXPECT_EQ(chat.get_string("chat", ""), "mistral");
  EXPECT_EQ(chat.get_string("text", ""), "[INST] ab [/INST]");
  EXPECT_EQ(ids_of(chat), tokenize_ids({"--tokenizer", vocab, "--text", "[INST] ab [/INST]"}));
}

TEST(CliTokenize, Json) {
  const Json j = parse_json(run_kvscope({"tokenize", stories_bin(), "--text", "Once upon a time", "--json"}));
  EXPECT_EQ(j.get_string("tokenizer", ""), "sentencepiece-bpe");
  EXPECT_EQ(j.get_number("vocab_size", 0), 512);
  EXPECT_TRUE(j.get_bool("bos_added", false));
  ASSERT_NE(j.find("chat"), nullptr);
  EXPECT_TRUE(j.find("chat")->is_null());
  EXPECT_EQ(j.get_string("text", ""), "Once upon a time");
  EXPECT_EQ(j.get_number("n_tokens", 0), 5);
  EXPECT_EQ(ids_of(j), kOnceUponATime);
  EXPECT_EQ(strings_of(j, "pieces"), (std::vector<std::string>{"<s>", " Once", " upon", " a", " time"}));
  std::vector<bool> special;
  for (const Json& v : j.find("special")->items()) special.push_back(v.as_bool());
  EXPECT_EQ(special, (std::vector<bool>{true, false, false, false, false}));

  const Json nb =
      parse_json(run_kvscope({"tokenize", stories_bin(), "--no-bos", "--text", "Once upon a time", "--json"}));
  EXPECT_FALSE(nb.get_bool("bos_added", true));
  EXPECT_EQ(ids_of(nb), (std::vector<int>{403, 407, 261, 378}));
}

// --text again: each text on its own (one JSON line each, or blocks apart by an empty line).
TEST(CliTokenize, SeveralTexts) {
  const CliResult r = run_kvscope({"tokenize", stories_bin(), "--text", "Once upon a time", "--text=--a", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(count_lines(r.out), 2) << r.out;
  const size_t nl = r.out.find('\n');
  EXPECT_EQ(ids_of(Json::parse(r.out.substr(0, nl), "first")), kOnceUponATime);
  const Json second = Json::parse(r.out.substr(nl + 1), "second");
  EXPECT_EQ(second.get_string("text", ""), "--a");
  EXPECT_EQ(ids_of(second), tokenize_ids({stories_bin(), "--text=--a"}));
  const CliResult text = run_kvscope({"tokenize", stories_bin(), "--text", "a", "--text", "b"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out,
            "0    1  <s>\n1  261  \" a\"\n2 tokens (sentencepiece-bpe, 512 in its vocabulary, BOS added)\n\n"
            "0    1  <s>\n1  268  \" b\"\n2 tokens (sentencepiece-bpe, 512 in its vocabulary, BOS added)\n");
}

// --text-file reads as record's --prompt-file: no byte-order mark, no line breaks at the end.
TEST(CliTokenize, TextFile) {
  TempDir in;
  write_bytes(in.file("p.txt"), "\xEF\xBB\xBFOnce upon a time\r\n\n");
  EXPECT_EQ(tokenize_ids({stories_bin(), "--text-file", in.file("p.txt")}), kOnceUponATime);
}

// --chat wraps the text as record --chat does: here a copy of stories260K-hf whose
// tokenizer_config.json holds a chat template ([INST] ... [/INST] a user turn), rendered.
TEST(CliTokenize, ChatFormatOfAModelFolder) {
  TempDir m;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    std::filesystem::copy_file(shared(std::string("stories260K-hf/") + f), m.file(f));
  const auto with_template = [&](const std::string& t) {
    write_bytes(m.file("tokenizer_config.json"), R"({"chat_template": ")" + t + R"("})");
  };
  with_template("{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}");
  const Json j = parse_json(run_kvscope({"tokenize", m.path(), "--chat", "--text", "Once upon a time", "--json"}));
  EXPECT_EQ(j.get_string("chat", ""), "template");
  EXPECT_EQ(j.get_string("text", ""), "[INST] Once upon a time [/INST]");
  EXPECT_TRUE(j.get_bool("bos_added", false));  // the tokenizer's, the template writes none
  const std::vector<int> ids = ids_of(j);
  EXPECT_EQ(ids, tokenize_ids({m.path(), "--text", "[INST] Once upon a time [/INST]"}));
  EXPECT_EQ(ids, recorded_prompt_ids(m.path(), "Once upon a time", {"--chat"}));
  // The tokenizer.json alone finds the chat template beside it.
  EXPECT_EQ(tokenize_ids({"--tokenizer", m.file("tokenizer.json"), "--chat", "--text", "Once upon a time"}), ids);
  // A template that writes BOS itself: the tokenizer reads it as its BOS and adds no second one.
  with_template("{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}");
  const Json b = parse_json(run_kvscope({"tokenize", m.path(), "--chat", "--text", "Once upon a time", "--json"}));
  EXPECT_EQ(b.get_string("text", ""), "<s>[INST] Once upon a time [/INST]");
  EXPECT_FALSE(b.get_bool("bos_added", true));
  EXPECT_EQ(ids_of(b), ids);
  EXPECT_EQ(recorded_prompt_ids(m.path(), "Once upon a time", {"--chat"}), ids);
  // --system: a system turn first, as the template writes one
  with_template("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>");
  const Json sys = parse_json(
      run_kvscope({"tokenize", m.path(), "--chat", "--system", "Be brief.", "--text", "Once upon a time", "--json"}));
  EXPECT_EQ(sys.get_string("text", ""), "<|system|>Be brief.<|user|>Once upon a time<|assistant|>");
  EXPECT_EQ(ids_of(sys), recorded_prompt_ids(m.path(), "Once upon a time", {"--chat", "--system", "Be brief."}));
  const CliResult no_chat = run_kvscope({"tokenize", m.path(), "--system", "Be brief.", "--text", "x"});
  EXPECT_EQ(no_chat.code, 2);
  EXPECT_EQ(no_chat.err, "kvscope: --system: applies to --chat's format, and --chat is not given\n");
  // A template beyond the Jinja subset falls back to its family's fixed format, which has no system turn.
  with_template("{% include 'x' %}[INST] {{ m }} [/INST]<<SYS>>");
  EXPECT_EQ(parse_json(run_kvscope({"tokenize", m.path(), "--chat", "--text", "Hi", "--json"})).get_string("chat", ""),
            "llama2");
  const CliResult fixed = run_kvscope({"tokenize", m.path(), "--chat", "--system", "Be brief.", "--text", "Hi"});
  EXPECT_EQ(fixed.code, 2);
  EXPECT_EQ(fixed.err,
            "kvscope: --system: the chat template cannot be rendered (line 1: {% include %} is not supported), and "
            "KVScope's fixed formats write no system turn\n");
}

// SmolLM2's chat format, when the default model is in the cache: ChatML with its system prompt,
// no BOS (its tokenizer adds none), the special tokens as one token each.
TEST(CliTokenize, SmolLM2Chat) {
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  const Json j = parse_json(run_kvscope({"tokenize", model, "--chat", "--text", "Hi", "--json"}));
  EXPECT_EQ(j.get_string("chat", ""), "template");
  EXPECT_FALSE(j.get_bool("bos_added", true));
  const std::vector<int> ids = ids_of(j);
  ASSERT_EQ(ids.size(), 31u);
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 3),
            (std::vector<int>{1, 9690, 198}));           // <|im_start|>system\n
  EXPECT_EQ(std::vector<int>(ids.end() - 9, ids.end()),  // user\nHi<|im_end|>\n<|im_start|>assistant\n
            (std::vector<int>{4093, 198, 26843, 2, 198, 1, 520, 9531, 198}));
  EXPECT_EQ(ids, recorded_prompt_ids(model, "Hi", {"--chat"}));
}

// ---- bad input: one line naming the thing and the problem, exit code 2, nothing on stdout ----

TEST(CliTokenizeBadInput, Files) {
  TempDir in;
  const std::string missing = in.file("missing.gguf");
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", missing, "--text", "a"}), missing, "no such file or folder"));
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", "--tokenizer", missing, "--text", "a"}), missing, "no such file"));
  write_bytes(in.file("notes.txt"), "just some notes, not a tokenizer\n");
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", "--tokenizer", in.file("notes.txt"), "--text", "a"}),
                             in.file("notes.txt"), "not a llama2.c tokenizer"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", tok512(), "--text", "a"}), tok512(),
                             "is a llama2.c tokenizer, not a model (give it as --tokenizer)"));
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", stories_bin(), "--tokenizer", tiny_random_gguf(), "--text", "a"}),
                     tiny_random_gguf(), "vocabulary of 32000 tokens does not match the model's 512"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", in.path(), "--text", "a"}), in.path(),
                             "not a model folder (no config.json)"));
}

TEST(CliTokenizeBadInput, TextFiles) {
  TempDir in;
  const std::string m = stories_bin();
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text-file", in.file("none.txt")}), in.file("none.txt"),
                             "cannot read text file"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text-file", in.path()}), in.path(),
                             "is a directory, not a text file"));
  write_bytes(in.file("latin1.txt"), "caf\xE9");
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text-file", in.file("latin1.txt")}),
                             in.file("latin1.txt"), "text file is not valid UTF-8 text"));
  write_bytes(in.file("nul.txt"), std::string("a\0b", 3));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text-file", in.file("nul.txt")}), in.file("nul.txt"),
                             "text file contains a NUL byte"));
  write_bytes(in.file("empty.txt"), "\n\n");
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text-file", in.file("empty.txt")}), in.file("empty.txt"),
                             "text file is empty"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text", "caf\xE9"}), "--text", "is not valid UTF-8 text"));
}

TEST(CliTokenizeBadInput, Flags) {
  const std::string m = stories_bin();
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", m, "--text", "a", "--frobnicate"}), "--frobnicate", "unknown option"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m}), "--text", "give --text TEXT"));
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", m, "--text", "a", "--text-file", "f"}), "--text", "give --text TEXT"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", "--text", "a"}), "tokenize",
                             "expects a model path or --tokenizer PATH"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, m, "--text", "a"}), m, "unexpected argument"));
  EXPECT_TRUE(is_input_error(run_kvscope({"tokenize", m, "--text="}), "--text", "is empty"));
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", m, "--text", "a", "--json", "--json"}), "--json", "given twice"));
  EXPECT_TRUE(
      is_input_error(run_kvscope({"tokenize", m, "--chat", "--text", "a"}), "--chat", m + " has no chat format"));
}

}  // namespace
}  // namespace kvs::cli_test
