// End-to-end tests of `kvscope record` (issue 2): the greedy stories260K continuation from the
// .bin and the .gguf, the written trace read back by h5py, and every bad input -> one line, exit 2,
// no output file; an output that is not a regular file is never replaced.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <cstdio>
#include <cstring>

#include "analysis/trace.h"
#include "cli_util.h"
#include "tests/inference/gguf_writer.h"
#include "inference/loader.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace kvs::cli_test {
namespace {

// llama2.c's documented greedy continuation (SOURCES.md); 60 steps print a prefix of it.
const std::string kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One "
    "day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, "
    "\"Lily, let's go to the park.\" Lily was sad and didn't know what to do.";

// Stdout of a record run is the decoded prompt, the streamed continuation and one final newline.
void expect_story(const CliResult& r, const TempDir& out_dir) {
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  ASSERT_EQ(r.out.back(), '\n');
  const std::string text = r.out.substr(0, r.out.size() - 1);
  EXPECT_EQ(kStory.compare(0, text.size(), text), 0) << "stdout is not a prefix of the story:\n" << text;
  // 60 greedy steps reach past the first paragraph.
  EXPECT_NE(text.find("She wanted to play with it, but it was too high.\nLily"), std::string::npos) << text;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("5 prompt tokens in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" + 60 steps at "), std::string::npos) << r.err;
  // Only the committed trace is left in the output folder (no temporary sibling).
  EXPECT_EQ(out_dir.entries(), std::vector<std::string>{"story.h5"});
}

TEST(CliRecord, GreedyStoryFromBinWithTokenizerBeside) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time",
                                   "--steps", "60", "--out", out.file("story.h5")});
  expect_story(r, out);
}

TEST(CliRecord, GreedyStoryFromBinWithTokenizerFlag) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--tokenizer", tok512(), "--prompt",
                                   "Once upon a time", "--steps", "60", "--out", out.file("story.h5")});
  expect_story(r, out);
}

TEST(CliRecord, GreedyStoryFromGguf) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_gguf(), "--prompt", "Once upon a time",
                                   "--steps", "60", "--out", out.file("story.h5")});
  expect_story(r, out);
}

// $KVSCOPE_CACHE set to `dir` for the scope (the model cache default_model_path() looks in).
class ModelCacheAt {
 public:
  explicit ModelCacheAt(const std::string& dir) {
    if (const char* old = std::getenv("KVSCOPE_CACHE")) saved_ = old;
    had_ = std::getenv("KVSCOPE_CACHE") != nullptr;
    ::setenv("KVSCOPE_CACHE", dir.c_str(), 1);
  }
  ~ModelCacheAt() {
    if (had_) ::setenv("KVSCOPE_CACHE", saved_.c_str(), 1);
    else ::unsetenv("KVSCOPE_CACHE");
  }

 private:
  std::string saved_;
  bool had_ = false;
};

// Without --model, record takes the default model from the model cache, says so on stderr, and
// records what --model naming it would (stories260K's GGUF under the default's name here).
TEST(CliRecord, WithoutModelTheDefaultFromTheCache) {
  TempDir cache, out;
  const std::string def = cache.file("SmolLM2-135M-Instruct.Q4_1.gguf");
  fs::create_symlink(stories_gguf(), def);
  const ModelCacheAt at(cache.path());
  const CliResult r = run_kvscope({"record", "--prompt", "Once upon a time", "--steps", "60", "--out",
                                   out.file("story.h5")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("kvscope: no --model given: the default, " + def + "\n", 0), 0u) << r.err;
  EXPECT_EQ(r.out.rfind(kStory.substr(0, 120), 0), 0u) << r.out;
  EXPECT_EQ(run_kvscope({"record", "--prompt", "Once upon a time", "--steps", "2", "--quiet", "--out",
                         out.file("quiet.h5")}).err, "");  // --quiet: nothing said
}

// Recording over an earlier trace keeps that file's permissions (a private trace stays private);
// a trace whose owner has no write bit is refused, as appends refuse it, even for root.
TEST(CliRecord, ReplacingATraceKeepsItsModeAndAReadOnlyOneIsRefused) {
  TempDir out;
  const std::string t = out.file("t.h5");
  auto record = [&] {
    return run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--steps", "2", "--out", t});
  };
  ASSERT_EQ(record().code, 0);
  ASSERT_EQ(::chmod(t.c_str(), 0600), 0);
  ASSERT_EQ(record().code, 0);
  struct stat st;
  ASSERT_EQ(::stat(t.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::chmod(t.c_str(), 0444), 0);
  const std::string before = read_bytes(t);
  EXPECT_TRUE(is_input_error(record(), t, "is read-only (its owner has no write permission); not replacing it"));
  EXPECT_TRUE(read_bytes(t) == before);
  EXPECT_EQ(out.entries(), std::vector<std::string>{"t.h5"});
}

// stories260K marks the end of a story with BOS (id 1), where llama2.c's run.c stops: from the
// prompt "x" its first story ends after 361 tokens, and the recording ends there with a note, not
// running a second story on.
TEST(CliRecord, GenerationStopsAtABeginOfTextToken) {
  for (const std::string& model : {stories_bin(), stories_gguf()}) {
    TempDir out;
    const CliResult r =
        run_kvscope({"record", "--model", model, "--prompt", "x", "--steps", "400", "--out", out.file("x.h5")});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("the model ended the text (end-of-text or begin-of-text token) after 361 of 400 steps"),
              std::string::npos)
        << r.err;
    const TraceReader trace(out.file("x.h5"));
    EXPECT_EQ(trace.meta().n_steps, 361);
    const std::vector<int32_t> ids = trace.token_ids();
    EXPECT_EQ(std::count(ids.begin() + 1, ids.end(), 1), 0) << "a BOS past the prompt's own";
    EXPECT_EQ(r.out.find("Once upon a time"), std::string::npos) << "a second story began";
  }
}

// Checks a CLI-recorded stories260K trace with h5py by the documented names: the token ids, and
// that every decode row is a distribution that is zero past its query position.
const char* kH5pyCheck = R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    ids = f["tokens/ids"][:]
    P, n = int(f.attrs["prompt_len"]), int(f.attrs["n_steps"])
    assert P == 5 and n == 12, (P, n)
    assert ids.shape == (P + n,) and list(ids[:P]) == [1, 403, 407, 261, 378], ids
    dec = f["attention/decode"][:]
    qpos = f["attention/decode_query_pos"][:]
    assert dec.shape == (n, 5, 8, P + n), dec.shape
    for s in range(n):
        rows = dec[s].astype(np.float64)
        assert np.all(np.abs(rows.sum(axis=-1) - 1.0) <= 1e-5), (s, rows.sum(axis=-1))
        assert np.all(rows[..., qpos[s] + 1:] == 0.0), s
        assert np.all(rows[..., :qpos[s] + 1] >= 0.0), s
    assert "".join(f["tokens/text"].asstr()[P:]).startswith(", there was a little girl"), f["tokens/text"][:]
print("OK")
)PY";

std::string run_python(const std::string& script_path, const std::string& arg) {
  return test::run_command("/usr/bin/python3 '" + script_path + "' '" + arg + "'");
}

TEST(CliRecord, TraceReadsWithH5pyByDocumentedNames) {
  if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  const std::string trace = dir.file("t.h5");
  const CliResult r = record_stories(trace, "Once upon a time", 12);
  ASSERT_EQ(r.code, 0) << r.err;
  write_bytes(dir.file("check.py"), kH5pyCheck);
  EXPECT_EQ(run_python(dir.file("check.py"), trace), "OK\n");
  // The project's documented-names reader (tests/python/read_trace.py) accepts it too.
  const std::string out = run_python(test::source_path("tests/python/read_trace.py"), trace);
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

// tests/python/compare_traces.py (the GPU check compares a CPU and a GPU recording with it): two
// recordings of the same prompt agree to 0 and pass; another prompt's tokens differ and fail.
TEST(CliRecord, CompareTracesPassesTheSameRunAndFailsAnother) {
  if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  ASSERT_EQ(record_stories(dir.file("a.h5"), "Once upon a time", 12).code, 0);
  ASSERT_EQ(record_stories(dir.file("b.h5"), "Once upon a time", 12).code, 0);
  ASSERT_EQ(record_stories(dir.file("c.h5"), "Once upon a time there", 12).code, 0);
  const std::string script = test::source_path("tests/python/compare_traces.py");
  auto compare = [&](const std::string& x, const std::string& y) {
    return test::run_command("/usr/bin/python3 '" + script + "' '" + dir.file(x) + "' '" + dir.file(y) + "'");
  };
  const std::string same = compare("a.h5", "b.h5");
  EXPECT_NE(same.find("tokens: the same 17 ids"), std::string::npos) << same;
  EXPECT_NE(same.find("decode rows: largest difference 0; 100.00% of 480 rows within 1e-3"), std::string::npos) << same;
  EXPECT_EQ(same.find("exit status"), std::string::npos) << same;
  const std::string other = compare("a.h5", "c.h5");
  EXPECT_NE(other.find("tokens differ (first at position 5)"), std::string::npos) << other;
  EXPECT_NE(other.find("(exit status"), std::string::npos) << other;
}

// Joining the generated tokens' texts in h5py gives the generated text, the newline token a
// newline (docs/trace-format.md, /tokens): 60 steps of the story pass its "\nLily".
const char* kJoinCheck = R"PY(
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    joined = "".join(f["tokens/text"].asstr()[int(f.attrs["prompt_len"]):])
story = open(sys.argv[2], encoding="utf-8").read()
assert "\nLily" in joined and story.startswith(joined), repr(joined)
print("OK")
)PY";

TEST(CliRecord, TokenTextsJoinToTheGeneratedText) {
  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  write_bytes(dir.file("check.py"), kJoinCheck);
  write_bytes(dir.file("story.txt"), kStory.substr(std::strlen("Once upon a time")));
  for (const std::string& model : {stories_bin(), stories_gguf()}) {
    const std::string trace = dir.file("t.h5");
    std::remove(trace.c_str());
    ASSERT_EQ(record_stories(trace, "Once upon a time", 60, model).code, 0) << model;
    EXPECT_EQ(test::run_command("/usr/bin/python3 '" + dir.file("check.py") + "' '" + trace + "' '" +
                                dir.file("story.txt") + "'"),
              "OK\n")
        << model;
  }
}

// A recording under a policy names it in the trace, and the commands that measure against its
// rows say they are that run's, not a full cache's; a full recording names none. Its prompt's
// attention, which the recorder took from the reference run's prefill (the policy run starts from
// it), is the full recording's bit for bit.
TEST(CliRecord, RecordedUnderAPolicyIsNamedAndNoted) {
  TempDir dir;
  const std::string full = dir.file("full.h5"), under = dir.file("under.h5");
  ASSERT_EQ(record_stories(full, "Once upon a time", 6).code, 0);
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps", "6",
                                   "--policy", "streamingllm", "--budget", "4", "--out", under, "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TraceReader(full).meta().recorded_under, "");
  EXPECT_EQ(TraceReader(under).meta().recorded_under, "streamingllm_b4_free");
  const PrefillEvidence full_prompt = TraceReader(full).read_prefill();
  const PrefillEvidence under_prompt = TraceReader(under).read_prefill();
  EXPECT_EQ(under_prompt.colsum, full_prompt.colsum);
  EXPECT_EQ(under_prompt.window_rows, full_prompt.window_rows);
  EXPECT_EQ(under_prompt.window_lse, full_prompt.window_lse);
  ASSERT_FALSE(under_prompt.colsum.empty());
  // The run's counts and bytes as a re-run has them; no recall (no full-cache rows to measure).
  const RunData run = TraceReader(under).read_run("streamingllm_b4_free", false);
  std::map<std::string, const NamedArray*> metric;
  for (const NamedArray& m : run.metrics) metric[m.name] = &m;
  for (const char* name : {"recall", "topk_miss", "kept", "evicted", "inactive", "kv_bytes", "paged_bytes_freed"})
    ASSERT_TRUE(metric.count(name)) << name;
  const int P = TraceReader(under).meta().prompt_len;
  const size_t per_step = metric["kept"]->data.size() / 6;  // [6 steps, L, Hkv]
  for (size_t i = 0; i < metric["kept"]->data.size(); ++i) {
    const int ctx = P + static_cast<int>(i / per_step) + 1;
    EXPECT_EQ(metric["kept"]->data[i], 5.0f);  // at attention: the budget and the new token
    EXPECT_EQ(metric["evicted"]->data[i], static_cast<float>(ctx - 5));
    EXPECT_TRUE(std::isnan(metric["recall"]->data[i]));
  }
  EXPECT_NE(std::find(run.scalars.begin(), run.scalars.end(), std::pair<std::string, double>("block_size", 16.0)),
            run.scalars.end());
  const std::string note = "kvscope: note: the trace was recorded under streamingllm_b4_free: its rows cover only";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"simulate", under, "--policy", "window", "--budget", "4"}, {"heads", under}, {"layers", under}}) {
    const CliResult c = run_kvscope(args);
    ASSERT_EQ(c.code, 0) << args[0] << ": " << c.err;
    EXPECT_NE(c.err.find(note), std::string::npos) << args[0] << ": " << c.err;
  }
  EXPECT_EQ(run_kvscope({"heads", full}).err, "");
}

TEST(CliRecord, SmolLM2ChatKnowsTheCapitalOfFrance) {
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", model, "--chat", "--prompt",
                                   "What is the capital of France?", "--steps", "20", "--threads", "1",
                                   "--out", out.file("c.h5")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
}

// ---- bad input: one line naming the thing and the problem, exit code 2, no output file ----

class CliRecordBadInput : public ::testing::Test {
 protected:
  // Runs record with `model_args` into an empty output folder; the folder must stay empty.
  CliResult record_into_empty(std::vector<std::string> model_args, const std::string& prompt = "Once",
                              const std::string& steps = "5") {
    std::vector<std::string> args{"record"};
    args.insert(args.end(), model_args.begin(), model_args.end());
    for (const std::string& a : {std::string("--prompt"), prompt, std::string("--steps"), steps,
                                 std::string("--out"), out.file("out.h5")})
      args.push_back(a);
    CliResult r = run_kvscope(args);
    EXPECT_TRUE(out.entries().empty()) << "output folder not empty after a failed record";
    return r;
  }
  TempDir in;   // inputs made by the test
  TempDir out;  // where the trace would go
};

// A llama GGUF whose every weight is 0.25: every logit is equal, so greedy decoding chooses id 0,
// which this vocabulary names end-of-text. `chat_template` (when not empty) is stored as its chat
// format.
std::string write_eos_first_model(const std::string& path, const std::string& chat_template) {
  testing::GgufWriter w = testing::tiny_llama_writer(1);
  w.add_u32("llama.context_length", 64);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", {"</s>", "<s>", "\u2581a", "a"});
  w.add_f32s("tokenizer.ggml.scores", {0.0f, 0.0f, -1.0f, -2.0f});
  w.add_i32s("tokenizer.ggml.token_type", {3, 3, 1, 1});
  w.add_u32("tokenizer.ggml.eos_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  if (!chat_template.empty()) w.add_string("tokenizer.chat_template", chat_template);
  w.write(path);
  return path;
}

// A model that ends the text at once leaves no decode step: simulate, rerun, heads and layers
// would refuse the trace, so none is written; a chat model's message says to use its chat format.
TEST_F(CliRecordBadInput, ModelEndingTheTextAtOnce) {
  const std::string base = write_eos_first_model(in.file("base.gguf"), "");
  CliResult r = record_into_empty({"--model", base}, "a");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: prompt: the model ended the text at once (end-of-text or begin-of-text as its first "
                   "token): no decode step to record\n");
  const std::string chat = write_eos_first_model(in.file("chat.gguf"),
                                                 "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>' }}");
  r = record_into_empty({"--model", chat}, "a");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(chat + " is a chat model: give the prompt in its chat format (--chat"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// --chat on a model without a chat template says it is a base model; on one whose template cannot
// be rendered (a filter Jinja lacks) and that none of the fixed formats matches, says why and lists
// the formats.
TEST_F(CliRecordBadInput, ChatWithoutAFormatItWrites) {
  const std::string base = write_eos_first_model(in.file("base.gguf"), "");
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", base, "--chat"}, "a"), "--chat",
                             base + " has no chat format (a base model)"));
  const std::string other = write_eos_first_model(
      in.file("other.gguf"), "{% for m in messages %}\n<|start_of_role|>{{ m['role'] | shout }}<|end_of_role|>{% endfor %}");
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", other, "--chat"}, "a"), "--chat",
                             "the chat template cannot be rendered (line 2: unknown filter 'shout') and none of "
                             "KVScope's fixed formats (smollm2, "));
}

// A tokenizer given where a model goes is named as one; a folder given as the tokenizer that has
// no tokenizer.json says so rather than failing to open a file it never named.
TEST_F(CliRecordBadInput, TokenizerAsModelAndFolderAsTokenizer) {
  const std::string spm = shared("stories260K/tok512.model");
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", spm}), spm,
                             "is a SentencePiece tokenizer model, not a model (give it as --tokenizer)"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", tok512()}), tok512(),
                             "is a llama2.c tokenizer, not a model (give it as --tokenizer)"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--tokenizer", in.path()}), in.path(),
                             "is a folder without tokenizer.json"));
}

TEST_F(CliRecordBadInput, TruncatedBin) {
  const std::string model = in.file("stories260K.bin");
  write_bytes(model, read_bytes(stories_bin()).substr(0, 1000));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", model, "--tokenizer", tok512()}), model, "truncated"));
}

TEST_F(CliRecordBadInput, TruncatedGguf) {
  const std::string model = in.file("stories260K.gguf");
  const std::string bytes = read_bytes(stories_gguf());
  write_bytes(model, bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", model}), model, "truncated"));
}

TEST_F(CliRecordBadInput, TextFileAsModel) {
  const std::string model = in.file("notes.txt");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "This is a plain text file, not a model.\n";
  write_bytes(model, text);
  const CliResult r = record_into_empty({"--model", model, "--tokenizer", tok512()});
  EXPECT_TRUE(is_input_error(r, model, "not a"));
}

// A trace given as the model (the two are side by side in a session) is named as such.
TEST_F(CliRecordBadInput, TraceAsModel) {
  const std::string model = in.file("story.h5");
  ASSERT_EQ(record_stories(model, "Once upon a time", 2).code, 0);
  const CliResult r = record_into_empty({"--model", model, "--tokenizer", tok512()});
  EXPECT_TRUE(is_input_error(r, model, "is an HDF5 file (a KVScope trace?), not a model")) << r.err;
}

TEST_F(CliRecordBadInput, PngAsModel) {
  const std::string model = in.file("picture.png");
  const char header[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0";  // signature, IHDR
  std::string png(header, sizeof header - 1);
  png += std::string(4000, '\x5a');
  write_bytes(model, png);
  const CliResult r = record_into_empty({"--model", model, "--tokenizer", tok512()});
  EXPECT_TRUE(is_input_error(r, model, "not a"));
}

TEST_F(CliRecordBadInput, MissingModel) {
  const std::string model = in.file("absent.bin");
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", model}), model, "no such file"));
}

// A FIFO is told by stat: opening it to sniff the format blocked forever (and record's signal
// handler swallowed Ctrl-C).
TEST_F(CliRecordBadInput, FifoAsModelOrTokenizer) {
  const std::string fifo = in.file("fifo.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", fifo}), fifo, "not a regular file"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--tokenizer", fifo}),
                             fifo, "not a regular file"));
}

TEST_F(CliRecordBadInput, TokenizerOf512TokensForA32000TokenModel) {
  const CliResult r = record_into_empty({"--model", tiny_random_gguf(), "--tokenizer", tok512()});
  EXPECT_TRUE(is_input_error(r, tok512(), "does not match"));
  EXPECT_NE(r.err.find("512"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("32000"), std::string::npos) << r.err;
}

// tok512.bin rewritten with only its first 256 tokens (llama2.c layout: max_token_length, then
// per token float score, int32 length, bytes).
std::string llama2c_tokenizer_prefix(const std::string& bytes, int n_tokens) {
  size_t pos = 4;
  for (int i = 0; i < n_tokens; ++i) {
    int32_t len = 0;
    std::memcpy(&len, bytes.data() + pos + 4, 4);
    pos += 8 + static_cast<size_t>(len);
  }
  return bytes.substr(0, pos);
}

TEST_F(CliRecordBadInput, TokenizerWithSmallerVocabulary) {
  const std::string tok = in.file("tok256.bin");
  write_bytes(tok, llama2c_tokenizer_prefix(read_bytes(tok512()), 256));
  const CliResult r = record_into_empty({"--model", stories_bin(), "--tokenizer", tok});
  EXPECT_TRUE(is_input_error(r, tok, "does not match"));
  EXPECT_NE(r.err.find("256"), std::string::npos) << r.err;
}

// Offset of the type field of tensor `name` in a GGUF file: its tensor-info entry is the name's
// uint64 length, the name, uint32 n_dims, n_dims uint64 dims, then uint32 type.
size_t gguf_tensor_type_offset(const std::string& bytes, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  const size_t at = bytes.find(key);
  if (at == std::string::npos) return std::string::npos;
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, bytes.data() + at + key.size(), 4);
  return at + key.size() + 4 + 8 * static_cast<size_t>(n_dims);
}

TEST_F(CliRecordBadInput, UnknownGgufTensorType) {
  std::string bytes = read_bytes(stories_gguf());
  const size_t off = gguf_tensor_type_offset(bytes, "blk.0.attn_q.weight");
  ASSERT_NE(off, std::string::npos);
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + off, 4);
  ASSERT_EQ(type, 0u) << "stories260K.gguf holds F32 tensors";
  const uint32_t q8_k = 15;  // ggml's intermediate type, never used for weights
  std::memcpy(bytes.data() + off, &q8_k, 4);
  const std::string model = in.file("q8k.gguf");
  write_bytes(model, bytes);
  const CliResult r = record_into_empty({"--model", model});
  EXPECT_TRUE(is_input_error(r, model, "blk.0.attn_q.weight"));
  EXPECT_NE(r.err.find("type 15"), std::string::npos) << r.err;
}

TEST_F(CliRecordBadInput, PromptLongerThanContext) {
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "word ";
  const CliResult r = record_into_empty({"--model", stories_bin()}, prompt);
  EXPECT_TRUE(is_input_error(r, "prompt", "exceed the model's context of 512 tokens"));
}

TEST_F(CliRecordBadInput, PromptPlusStepsLongerThanContext) {
  const CliResult r = record_into_empty({"--model", stories_bin()}, "Once upon a time", "508");
  EXPECT_TRUE(is_input_error(r, "prompt", "5 tokens + 508 steps exceed"));
}

TEST_F(CliRecordBadInput, UnwritableOut) {
  write_bytes(out.file("afile"), "a regular file, not a folder\n");
  const std::string target = out.file("afile") + "/out.h5";
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--steps", "3",
                                   "--out", target});
  EXPECT_TRUE(is_input_error(r, target, "cannot create"));
  EXPECT_EQ(out.entries(), std::vector<std::string>{"afile"});
  EXPECT_EQ(read_bytes(out.file("afile")), "a regular file, not a folder\n");
}

TEST_F(CliRecordBadInput, OutIsAFolder) {
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--steps", "3",
                                   "--out", out.path()});
  EXPECT_TRUE(is_input_error(r, out.path(), "is a folder, not a regular file; not replacing it"));
  EXPECT_TRUE(out.entries().empty());
}

// Only a regular file is ever replaced: a device node, a FIFO, a socket, a link to one of them
// or a link leading nowhere stays as it was (it used to become the trace, exit 0).
TEST_F(CliRecordBadInput, OutIsADeviceAFifoASocketOrALinkToNothing) {
  const std::string fifo = out.file("fifo"), sock = out.file("socket"), device = out.file("nulldev");
  const std::string dangling = out.file("dangling.h5"), to_fifo = out.file("to_fifo.h5");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, (const sockaddr*)&addr, sizeof addr), 0);
  fs::create_symlink("/nonexistent-kvscope/zz.h5", dangling);
  fs::create_symlink("fifo", to_fifo);
  std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "is a FIFO, not a regular file; not replacing it"},
      {sock, "is a socket, not a regular file; not replacing it"},
      {dangling, "is a symbolic link to /nonexistent-kvscope/zz.h5, which does not exist; not writing through it"},
      {to_fifo, "is a symbolic link to a FIFO"}};
  if (::mknod(device.c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0)  // /dev/null's numbers, in our folder (root)
    cases.push_back({device, "is a character device, not a regular file; not replacing it"});
  const std::vector<std::string> before = out.entries();
  for (const auto& [path, problem] : cases) {
    struct stat st0, st1;
    ASSERT_EQ(::lstat(path.c_str(), &st0), 0);
    const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--steps", "2",
                                     "--out", path});
    EXPECT_TRUE(is_input_error(r, path, problem));
    ASSERT_EQ(::lstat(path.c_str(), &st1), 0);
    EXPECT_EQ(st1.st_mode, st0.st_mode) << path;
    EXPECT_EQ(st1.st_ino, st0.st_ino) << path;
    EXPECT_EQ(st1.st_rdev, st0.st_rdev) << path;
  }
  ::close(fd);
  EXPECT_EQ(out.entries(), before) << "no temporary file, no trace";
}

// --out a symbolic link to an earlier trace: the link stays, the file it leads to gets the new trace.
TEST(CliRecord, OutSymlinkToATraceReplacesTheTraceItLeadsTo) {
  TempDir dir;
  ASSERT_EQ(record_stories(dir.file("real.h5"), "Once", 2).code, 0);
  fs::create_symlink("real.h5", dir.file("link.h5"));
  const CliResult r = record_stories(dir.file("link.h5"), "Once", 3);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir.file("link.h5")));
  EXPECT_EQ(TraceReader(dir.file("real.h5")).meta().n_steps, 3);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"link.h5", "real.h5"}));
}

TEST_F(CliRecordBadInput, UnknownFlag) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--bogus", "1"}), "--bogus",
                             "unknown option"));
}

TEST_F(CliRecordBadInput, StepsZeroNegativeAndText) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin()}, "Once", "0"), "--steps",
                             "0 is outside [1, "));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin()}, "Once", "-1"), "--steps",
                             "-1 is outside [1, "));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin()}, "Once", "abc"), "--steps",
                             "expected an integer, got 'abc'"));
}

// A bad live policy is refused before the prompt is printed or a trace is started.
TEST_F(CliRecordBadInput, BadLivePolicy) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "nosuch", "--budget", "8"}),
                             "--policy nosuch", "unknown policy"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "h2o"}), "--budget",
                             "is required (tokens kept per head) for --policy h2o"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "h2o", "--budget", "0"}),
                             "--budget", "0 is outside [1, 1073741824]"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "duoattention", "--budget", "4"}),
                             "--policy duoattention", "give pattern=DIR"));
}

TEST_F(CliRecordBadInput, SamplingOutOfRange) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--temperature", "-1"}), "--temperature",
                             "-1 is outside [0, 100]"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--top-p", "0"}), "--top-p",
                             "0 is outside [1e-06, 1]"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--temperature", "warm"}),
                             "--temperature", "expected a number, got 'warm'"));
}

TEST_F(CliRecordBadInput, MissingRequiredFlags) {
  {
    const ModelCacheAt empty(in.path());  // no default model fetched
    EXPECT_TRUE(is_input_error(run_kvscope({"record", "--prompt", "x", "--out", out.file("o.h5")}), "--model",
                               "is required (the default, SmolLM2-135M-Instruct, is not in the model cache: "
                               "bash scripts/fetch-model.sh fetches it)"));
  }
  EXPECT_TRUE(is_input_error(run_kvscope({"record", "--model", stories_bin(), "--prompt", "x"}), "--out",
                             "is required"));
  EXPECT_TRUE(is_input_error(run_kvscope({"record", "--model", stories_bin(), "--out", out.file("o.h5")}),
                             "--prompt", "exactly one"));
  EXPECT_TRUE(out.entries().empty());
}

// --out naming one of the inputs by mistake leaves it as it was.
TEST_F(CliRecordBadInput, OutIsTheModelTheTokenizerOrThePromptFile) {
  const std::string model = in.file("copy.bin"), tokenizer = in.file("tok.bin"), prompt = in.file("prompt.txt");
  const std::string model_bytes = read_bytes(stories_bin()), tok_bytes = read_bytes(tok512());
  write_bytes(model, model_bytes);
  write_bytes(tokenizer, tok_bytes);
  write_bytes(prompt, "Once upon a time\n");
  for (const std::string& out_path : {model, tokenizer, prompt}) {
    const CliResult r = run_kvscope({"record", "--model", model, "--tokenizer", tokenizer, "--prompt-file", prompt,
                                     "--steps", "3", "--out", out_path});
    EXPECT_TRUE(is_input_error(r, out_path, "exists and is not an HDF5 trace; not replacing it"));
  }
  EXPECT_TRUE(read_bytes(model) == model_bytes);
  EXPECT_TRUE(read_bytes(tokenizer) == tok_bytes);
  EXPECT_EQ(read_bytes(prompt), "Once upon a time\n");
  EXPECT_EQ(in.entries(), (std::vector<std::string>{"copy.bin", "prompt.txt", "tok.bin"}));
}

// A second value would silently replace the first: record enforces one policy, writes one trace.
TEST_F(CliRecordBadInput, FlagGivenTwice) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", "/nonexistent", "--model", stories_bin()}), "--model",
                             "given twice ('/nonexistent', then '" + stories_bin() + "')"));
  EXPECT_TRUE(is_input_error(
      record_into_empty({"--model", stories_bin(), "--policy", "h2o", "--policy", "snapkv", "--budget", "8"}),
      "--policy", "given twice"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--seed", "1", "--seed", "2"}), "--seed",
                             "given twice"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--quiet", "--quiet"}), "--quiet",
                             "given twice"));
}

TEST_F(CliRecordBadInput, BudgetThePolicyDoesNotUse) {
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "h2o:budget=5", "--budget", "8"}),
                             "--budget", "--policy h2o:budget=5 does not use it"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--policy", "full", "--budget", "8"}),
                             "--budget", "--policy full does not use it (full keeps every token)"));
  EXPECT_TRUE(is_input_error(
      record_into_empty({"--model", stories_bin(), "--policy", "omnikv:frac=0.1", "--budget", "8"}), "--budget",
      "--policy omnikv:frac=0.1 does not use it (OmniKV's frac= sets its budget from the prompt)"));
}

TEST_F(CliRecordBadInput, EmptyValuesAndABudgetWithoutAPolicy) {
  for (const char* flag : {"--tokenizer", "--policy"})
    EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), flag, ""}), flag, "is empty"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", ""}), "--model", "is empty"));
  EXPECT_TRUE(is_input_error(run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--out", ""}),
                             "--out", "is empty"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin(), "--budget", "8"}), "--budget",
                             "applies to the policy of --policy, and none is given"));
}

TEST_F(CliRecordBadInput, PromptsThatAreNotText) {
  const auto from_file = [&](const std::string& file) {
    return run_kvscope({"record", "--model", stories_bin(), "--prompt-file", file, "--out", out.file("out.h5")});
  };
  const std::string nul = in.file("nul.txt");
  write_bytes(nul, std::string("a\0b", 3));
  EXPECT_TRUE(is_input_error(from_file(nul), nul, "prompt file contains a NUL byte"));
  const std::string latin1 = in.file("latin1.txt");
  write_bytes(latin1, "caf\xE9");
  EXPECT_TRUE(is_input_error(from_file(latin1), latin1, "prompt file is not valid UTF-8 text"));
  EXPECT_TRUE(is_input_error(from_file(in.path()), in.path(), "is a directory, not a prompt file"));
  EXPECT_TRUE(is_input_error(record_into_empty({"--model", stories_bin()}, "caf\xE9"), "prompt",
                             "is not valid UTF-8 text"));
  EXPECT_TRUE(out.entries().empty());
}

// A prompt file that starts with a UTF-8 byte-order mark is the text after it (the mark was
// tokenized: 11 tokens instead of 5, and the trace's prompt began with U+FEFF).
TEST_F(CliRecordBadInput, AByteOrderMarkIsNotPartOfThePrompt) {
  const std::string bom = in.file("bom.txt");
  write_bytes(bom, "\xEF\xBB\xBFOnce upon a time\n");
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt-file", bom, "--steps", "2",
                                   "--quiet", "--out", out.file("bom.h5")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TraceReader(out.file("bom.h5")).meta().prompt, "Once upon a time");
}

// A value flag followed by another flag was given no value: "--prompt --steps 3" took "--steps"
// as the prompt and then called 3 an unexpected argument.
TEST_F(CliRecordBadInput, AFlagWhereAValueShouldBe) {
  EXPECT_TRUE(is_input_error(run_kvscope({"record", "--model", stories_bin(), "--prompt", "--steps", "3", "--out",
                                          out.file("x.h5")}),
                             "--prompt", "expects a value, got the flag --steps"));
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", "x.h5", "--policy", "--budget=8"}), "--policy",
                             "expects a value, got the flag --budget"));
  EXPECT_TRUE(out.entries().empty());
}

TEST(CliRecordQuiet, PrintsNothing) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once", "--steps", "3", "--quiet",
                                   "--out", out.file("q.h5")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(out.entries(), std::vector<std::string>{"q.h5"});
}

}  // namespace
}  // namespace kvs::cli_test
