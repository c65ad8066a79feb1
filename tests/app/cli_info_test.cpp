// End-to-end tests of `kvscope info` on the test models (llama2.c .bin, GGUF, HF folder) and on a
// recorded trace, in text and --json form, and its bad-input answers.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "analysis/h5_util.h"
#include "analysis/trace.h"
#include "cli_util.h"
#include "inference/json.h"
#include "tests/analysis/decode_trace_fixture.h"

namespace kvs::cli_test {
namespace {

Json parse_json(const CliResult& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  return Json::parse(r.out, "kvscope info --json");
}

// stories260K's weights: embedding 512 x 64 = 32768; per layer the two norms 2 x 64, wq and wo
// 64 x 64 each, wk and wv 32 x 64 each, and the MLP 3 x 172 x 64 = 45440, times 5 layers; the
// final norm 64. A separate classifier (the GGUF's) adds another 32768.
constexpr double kStoriesTiedParams = 32768 + 5 * 45440 + 64;  // 260032

void expect_stories_shape(const Json& j) {
  EXPECT_EQ(j.get_string("kind", ""), "model");
  EXPECT_EQ(j.get_string("arch", ""), "llama");
  EXPECT_EQ(j.get_number("dim", 0), 64);
  EXPECT_EQ(j.get_number("hidden_dim", 0), 172);
  EXPECT_EQ(j.get_number("n_layers", 0), 5);
  EXPECT_EQ(j.get_number("n_heads", 0), 8);
  EXPECT_EQ(j.get_number("n_kv_heads", 0), 4);
  EXPECT_EQ(j.get_number("head_dim", 0), 8);
  EXPECT_EQ(j.get_number("vocab_size", 0), 512);
  EXPECT_EQ(j.get_number("rope_theta", 0), 10000);
  EXPECT_EQ(j.get_string("weight_type", ""), "F32");
  EXPECT_EQ(j.get_string("tokenizer", ""), "sentencepiece-bpe");
}

TEST(CliInfo, LlamaCBinText) {
  const CliResult r = run_kvscope({"info", stories_bin()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("stories260K (llama, format llama2c, weights F32)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dim 64, ffn 172, 5 layers, 8 query heads, 4 KV heads (GQA 2), head_dim 8"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab      512; context 512; rope theta 10000 (interleaved pairs)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("tokenizer  sentencepiece-bpe, 512 tokens, bos 1, eos 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of weights read per decoded token; 36 matrices, all in fp32"), std::string::npos) << r.out;
  // 5 layers x 4 KV heads x (K, V) x head_dim 8 x 4 bytes = 1,280 bytes a position; 512 positions
  EXPECT_NE(r.out.find("kv cache   1.3 KB a position in fp32, 0.6 KB in fp16 or bf16 (--kv-dtype); 0.7 and 0.3 MB "
                       "at the whole 512-token context\n"),
            std::string::npos)
      << r.out;
}

TEST(CliInfo, LlamaCBinJson) {
  const Json j = parse_json(run_kvscope({"info", stories_bin(), "--json"}));
  expect_stories_shape(j);
  EXPECT_EQ(j.get_string("format", ""), "llama2c");
  EXPECT_EQ(j.get_string("path", ""), stories_bin());
  EXPECT_EQ(j.get_number("seq_len", 0), 512);
  EXPECT_TRUE(j.get_bool("tied_classifier", false));
  EXPECT_FALSE(j.get_bool("qkv_bias", true));
  EXPECT_FALSE(j.get_bool("qk_norm", true));
  EXPECT_EQ(j.get_number("qk_norm_width", -1), 0);
  EXPECT_EQ(j.get_string("block_norms", ""), "before");
  EXPECT_EQ(j.get_number("parameters", 0), kStoriesTiedParams);
  EXPECT_EQ(j.get_string("rope_style", ""), "interleaved");
  EXPECT_EQ(j.get_number("kv_bytes_per_position", 0), 1280);
}

TEST(CliInfo, LlamaCBinWithTokenizerFlag) {
  const Json j = parse_json(run_kvscope({"info", stories_bin(), "--tokenizer", tok512(), "--json"}));
  expect_stories_shape(j);
}

TEST(CliInfo, GgufJson) {
  const Json j = parse_json(run_kvscope({"info", stories_gguf(), "--json"}));
  expect_stories_shape(j);
  EXPECT_EQ(j.get_string("format", ""), "gguf");
  EXPECT_EQ(j.get_number("seq_len", 0), 2048);  // llama.cpp's converter default (SOURCES.md)
  EXPECT_FALSE(j.get_bool("tied_classifier", true));
  // The parameters were weight bytes per decoded token / 4: one embedding row, not all of them.
  EXPECT_EQ(j.get_number("parameters", 0), kStoriesTiedParams + 32768);  // 292800
}

TEST(CliInfo, GgufText) {
  const CliResult r = run_kvscope({"info", stories_gguf()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("format gguf, weights F32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab      512; context 2048"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("separate classifier"), std::string::npos) << r.out;
}

TEST(CliInfo, TinyRandomGgufWithLlama2Vocabulary) {
  const Json j = parse_json(run_kvscope({"info", tiny_random_gguf(), "--json"}));
  EXPECT_EQ(j.get_string("format", ""), "gguf");
  EXPECT_EQ(j.get_number("dim", 0), 8);
  EXPECT_EQ(j.get_number("n_layers", 0), 1);
  EXPECT_EQ(j.get_number("n_heads", 0), 2);
  EXPECT_EQ(j.get_number("hidden_dim", 0), 32);
  EXPECT_EQ(j.get_number("vocab_size", 0), 32000);
  EXPECT_EQ(j.get_string("weight_type", ""), "F16");
  // Embedding and classifier 32000 x 8 each; one layer of norms 2 x 8, q/k/v/o 4 x 8 x 8 and MLP
  // 3 x 32 x 8; the final norm 8.
  EXPECT_EQ(j.get_number("parameters", 0), 2 * 256000 + 1040 + 8);  // 513048
  EXPECT_EQ(j.get_number("matrices", 0), 9);
  EXPECT_EQ(j.get_number("matrices_as_stored", -1), 9);  // F16 panels, not expanded to fp32
}

TEST(CliInfo, HuggingFaceFolderJson) {
  const Json j = parse_json(run_kvscope({"info", shared("stories260K-hf"), "--json"}));
  expect_stories_shape(j);
  EXPECT_EQ(j.get_string("rope_style", ""), "rotate_half");
  EXPECT_TRUE(j.get_bool("tied_classifier", false));
  EXPECT_EQ(j.get_number("parameters", 0), kStoriesTiedParams);  // was off by one row of 64
}

// What --chat writes: nothing for a base model; for a folder with a chat template, the template
// rendered around the message (text and JSON); for one that cannot be rendered, why.
TEST(CliInfo, ChatFormatIsShown) {
  EXPECT_NE(run_kvscope({"info", stories_bin()}).out.find("chat       none (a base model)"), std::string::npos);
  EXPECT_EQ(parse_json(run_kvscope({"info", stories_bin(), "--json"})).get_string("chat_problem", ""),
            "none (a base model)");
  TempDir dir;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    std::filesystem::copy_file(shared(std::string("stories260K-hf/") + f), dir.file(f));
  const auto with_template = [&](const std::string& t) {
    std::ofstream(dir.file("tokenizer_config.json")) << R"({"chat_template": ")" << t << R"("})";
  };
  with_template("{{ bos_token }}{% for m in messages %}{{ '<|user|>\\n' + m.content }}{% endfor %}<|bot|>");
  EXPECT_NE(run_kvscope({"info", dir.path()}).out.find(R"(chat       its chat template: "<s><|user|>\n" + message + "<|bot|>")"),
            std::string::npos);
  const Json j = parse_json(run_kvscope({"info", dir.path(), "--json"}));
  EXPECT_EQ(j.get_string("chat", ""), "template");
  EXPECT_EQ(j.get_string("chat_before", ""), "<s><|user|>\n");
  EXPECT_EQ(j.get_string("chat_after", ""), "<|bot|>");
  with_template("{% include 'other.jinja' %}");
  EXPECT_NE(run_kvscope({"info", dir.path()}).out.find("chat       --chat: the chat template cannot be rendered (line 1: "
                                                       "{% include %} is not supported)"),
            std::string::npos);
}

// A YaRN-scaled folder (stories260K-hf's, its config.json given a rope_scaling): the scaling's
// type, factor, original context and attention factor, in text and JSON.
TEST(CliInfo, RopeScalingIsDescribed) {
  TempDir dir;
  fs::copy(shared("stories260K-hf"), dir.path(), fs::copy_options::recursive);
  std::ifstream in(dir.file("config.json"));
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  config.insert(1, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8.0, "
                   "\"original_max_position_embeddings\": 64},");
  std::ofstream(dir.file("config.json"), std::ios::trunc) << config;
  const CliResult text = run_kvscope({"info", dir.path()});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("rope theta 10000 (rotate-half, yarn scaling by 8 over 64 positions, attention factor 1.208)"),
            std::string::npos) << text.out;
  const Json j = parse_json(run_kvscope({"info", dir.path(), "--json"}));
  EXPECT_EQ(j.get_string("rope_scaling", ""), "yarn");
  EXPECT_EQ(j.get_number("rope_factor", 0), 8);
  EXPECT_NEAR(j.get_number("rope_attention_factor", 0), 0.1 * std::log(8.0) + 1, 1e-6);
  EXPECT_EQ(j.get_number("nope_layers", -1), 0);
  EXPECT_EQ(j.get_number("rotary_dim", 0), 8);
}

class CliInfoTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const CliResult r = record_stories(dir_->file("t.h5"), "Once upon a time", 6);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string trace() { return dir_->file("t.h5"); }
  static TempDir* dir_;
};
TempDir* CliInfoTrace::dir_ = nullptr;

TEST_F(CliInfoTrace, Json) {
  const Json j = parse_json(run_kvscope({"info", trace(), "--json"}));
  for (const char* key : {"kind", "path", "schema_version", "model", "model_path", "arch", "n_layers", "n_heads",
                          "n_kv_heads", "head_dim", "prompt_len", "n_steps", "decode_dtype", "has_prefill_map",
                          "capture_note", "runs"})
    EXPECT_NE(j.find(key), nullptr) << key;
  EXPECT_EQ(j.get_string("kind", ""), "trace");
  EXPECT_EQ(j.get_number("schema_version", 0), 1);
  EXPECT_EQ(j.get_string("model", ""), "stories260K");
  // Stored without "..", so that another clone beside the same ../shared finds it too.
  EXPECT_EQ(j.get_string("model_path", ""), std::filesystem::weakly_canonical(stories_bin()).string());
  EXPECT_EQ(j.get_number("n_layers", 0), 5);
  EXPECT_EQ(j.get_number("n_heads", 0), 8);
  EXPECT_EQ(j.get_number("n_kv_heads", 0), 4);
  EXPECT_EQ(j.get_number("head_dim", 0), 8);
  EXPECT_EQ(j.get_number("prompt_len", 0), 5);
  EXPECT_EQ(j.get_number("n_steps", 0), 6);
  EXPECT_EQ(j.get_string("decode_dtype", ""), "float32");
  EXPECT_TRUE(j.get_bool("has_prefill_map", false));
  ASSERT_TRUE(j.find("runs")->is_array());
  EXPECT_EQ(j.find("runs")->size(), 0u);
}

TEST_F(CliInfoTrace, TextListsRunsAfterSimulate) {
  TempDir d;
  const std::string t = d.file("t.h5");
  write_bytes(t, read_bytes(trace()));
  const CliResult s = run_kvscope({"simulate", t, "--policy", "window", "--policy", "h2o:heavy=2", "--budget", "4"});
  ASSERT_EQ(s.code, 0) << s.err;
  const CliResult r = run_kvscope({"info", t});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokens     5 prompt + 6 decode steps = 11"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shape      5 layers, 8 query heads, 4 KV heads, head_dim 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs       2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("h2o_heavy2_b4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("window_b4"), std::string::npos) << r.out;
  const Json j = parse_json(run_kvscope({"info", t, "--json"}));
  const Json* runs = j.find("runs");
  ASSERT_TRUE(runs && runs->is_array());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ(runs->items()[0].as_string(), "h2o_heavy2_b4");
  EXPECT_EQ(runs->items()[1].as_string(), "window_b4");
}

// What `heads --model M trace.h5` stores changes what later runs do (a plain duoattention takes
// the stored gates) and costs minutes to recompute: info says it is there and what it holds.
TEST_F(CliInfoTrace, SaysWhichGatesAndRetrievalScoresTheTraceStores) {
  TempDir d;
  const std::string t = d.file("t.h5");
  write_bytes(t, read_bytes(trace()));
  CliResult r = run_kvscope({"info", t});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("alpha "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("retrieval "), std::string::npos) << r.out;
  std::vector<float> alpha(5 * 4, 0.5f), score(5 * 8, 0.0f);
  score[3 * 8 + 6] = 0.75f;  // 3-6, the best
  score[1 * 8 + 2] = 0.25f;  // 1-2
  score[4 * 8 + 0] = 0.05f;  // below Wu et al.'s 0.1: not a retrieval head
  append_array(t, "/heads/alpha", {"alpha", {5, 4}, alpha}, {{"source", "estimated: mse of logits"}});
  append_array(t, "/heads/retrieval_score", {"retrieval_score", {5, 8}, score}, {{"trials_kept", "2 of 5"}});
  r = run_kvscope({"info", t});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("alpha      stored (estimated: mse of logits): a plain duoattention run on this trace takes "
                       "these gates"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("retrieval  stored (2 of 5 needle trials kept): 2 of 40 query heads above 0.1: 3-6 0.750, "
                       "1-2 0.250\n"), std::string::npos) << r.out;
  const Json j = parse_json(run_kvscope({"info", t, "--json"}));
  EXPECT_EQ(j.get_string("alpha_source", ""), "estimated: mse of logits");
  EXPECT_EQ(j.get_string("retrieval_trials_kept", ""), "2 of 5");
}

TEST_F(CliInfoTrace, TruncatedTrace) {
  TempDir d;
  const std::string t = d.file("cut.h5");
  const std::string bytes = read_bytes(trace());
  write_bytes(t, bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(is_input_error(run_kvscope({"info", t}), t, "truncated"));
}

TEST(CliInfoBadInput, Arguments) {
  EXPECT_TRUE(is_input_error(run_kvscope({"info"}), "info", "expects one model or trace path"));
  EXPECT_TRUE(is_input_error(run_kvscope({"info", stories_bin(), stories_gguf()}), "info",
                             "expects one model or trace path"));
  EXPECT_TRUE(is_input_error(run_kvscope({"info", stories_bin(), "--verbose"}), "--verbose", "unknown option"));
  EXPECT_TRUE(is_input_error(run_kvscope({"info", "/nonexistent/model.gguf"}), "/nonexistent/model.gguf",
                             "no such file"));
}

// A FIFO is told by stat: opening it to sniff the format blocked forever.
TEST(CliInfoBadInput, FifoIsNotARegularFile) {
  TempDir d;
  const std::string fifo = d.file("model.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(is_input_error(run_kvscope({"info", fifo}), fifo, "not a regular file"));
  EXPECT_TRUE(is_input_error(run_kvscope({"info", stories_bin(), "--tokenizer", fifo}), fifo,
                             "not a regular file"));
}

TEST(CliInfoBadInput, EmptyFileAndATokenizerForATrace) {
  TempDir d;
  write_bytes(d.file("empty.bin"), "");
  EXPECT_TRUE(is_input_error(run_kvscope({"info", d.file("empty.bin")}), d.file("empty.bin"), "is empty (0 bytes)"));
  const CliResult r = record_stories(d.file("t.h5"), "Once", 2);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(is_input_error(run_kvscope({"info", d.file("t.h5"), "--tokenizer", tok512()}), "--tokenizer",
                             "applies to a model"));
  // A trace's name on a file that is not one: said as such, not as a llama2.c checkpoint too short.
  write_bytes(d.file("text.h5"), "hello\n");
  EXPECT_TRUE(is_input_error(run_kvscope({"info", d.file("text.h5")}), d.file("text.h5"), "not an HDF5 file"));
}

// A trace written by another program with the required datasets alone: what it leaves out is
// said to be absent, not printed as blanks ("written by kvscope , )").
TEST(CliInfo, ATraceWithoutProvenanceOrPrefillReductionsSaysSo) {
  TempDir d;
  const test::DecodeTrace t = test::write_decode_trace(d.file("ext.h5"), 2, 4, 2, 6, 4, 5);
  const CliResult r = run_kvscope({"info", t.path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("capture    decode rows float32; prefill none (no column sums or window rows)\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find(" , )"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("()"), std::string::npos) << r.out;
}

// Who wrote a trace: KVScope's traces hold its version, another writer's its own name.
TEST(CliInfo, TheWriterIsNamedAsTheTraceNamesIt) {
  TempDir d;
  const std::string ours = test::write_decode_trace(d.file("ours.h5"), 1, 2, 1, 4, 2, 5, "0.1.0").path;
  const std::string theirs =
      test::write_decode_trace(d.file("theirs.h5"), 1, 2, 1, 4, 2, 5, "hf_record.py 1 (transformers 5.24.0)").path;
  EXPECT_NE(run_kvscope({"info", ours}).out.find("(schema 1, written by kvscope 0.1.0, "), std::string::npos);
  EXPECT_NE(run_kvscope({"info", theirs}).out.find("(schema 1, written by hf_record.py 1 (transformers 5.24.0), "),
            std::string::npos);
}

// Without a tokenizer beside it, a llama2.c checkpoint is still described.
TEST(CliInfo, LlamaCBinWithoutATokenizer) {
  TempDir d;
  const std::string model = d.file("alone.bin");
  write_bytes(model, read_bytes(stories_bin()));
  const CliResult r = run_kvscope({"info", model});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("5 layers, 8 query heads"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer  none: " + model + ": no tokenizer found beside the model"), std::string::npos)
      << r.out;
  const Json j = parse_json(run_kvscope({"info", model, "--json"}));
  ASSERT_TRUE(j.find("tokenizer") && j.find("tokenizer")->is_null());
  EXPECT_NE(j.get_string("tokenizer_problem", "").find("no tokenizer found"), std::string::npos);
}

// Text from a trace reaches the terminal without its control characters (escape sequences).
TEST(CliInfo, TraceTextWithControlCharactersIsPrintedSafely) {
  TempDir d;
  const std::string t = d.file("t.h5");
  ASSERT_EQ(record_stories(t, "Once", 2).code, 0);
  {
    std::lock_guard<std::recursive_mutex> lock(h5::mutex());
    h5::init();
    const hid_t f = H5Fopen(t.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    h5::write_attr(f, "model", "evil\x1b[31mred\x07");
    H5Fclose(f);
  }
  const CliResult r = run_kvscope({"info", t});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model      evil?[31mred? (llama)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
}

// A trace whose name is not UTF-8 still gives JSON that parses.
TEST(CliInfo, JsonOfATraceWhoseNameIsNotUtf8) {
  TempDir d;
  const std::string t = d.file("bad\xFF.h5");
  ASSERT_EQ(record_stories(t, "Once", 2).code, 0);
  const Json j = parse_json(run_kvscope({"info", t, "--json"}));
  EXPECT_EQ(j.get_string("path", ""), d.file("bad\\xFF.h5"));
}

TEST(CliInfoBadInput, TokenizerGivenAsTheModel) {
  EXPECT_TRUE(is_input_error(run_kvscope({"info", tok512()}), tok512(),
                             "is a llama2.c tokenizer, not a model (give it as --tokenizer)"));
}

TEST(CliInfoBadInput, TokenizerOfAnotherModel) {
  EXPECT_TRUE(is_input_error(run_kvscope({"info", tiny_random_gguf(), "--tokenizer", tok512()}), tok512(),
                             "does not match"));
}

TEST(CliInfoBadInput, UnknownCommand) {
  const CliResult r = run_kvscope({"recrod"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("kvscope: unknown command 'recrod'\n", 0), 0u) << r.err;
}

}  // namespace
}  // namespace kvs::cli_test
