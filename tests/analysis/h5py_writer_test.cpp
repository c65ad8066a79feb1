// The reference Python writer (scripts/kvscope_trace.py, what scripts/hf_record.py exports through)
// writes traces KVScope reads as its own: a recorder's trace rewritten through it
// (tests/python/rewrite_trace.py) reads back with every array and attribute equal, simulates to the
// same runs, and `kvscope info` and `simulate` take it. Its capture decision and token text contract
// are KVScope's too. Skips when /usr/bin/python3 lacks h5py.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "analysis/policy.h"
#include "analysis/recorder.h"
#include "analysis/simulator.h"
#include "inference/tokenizer.h"
#include "run_equal.h"
#include "synthetic_engine.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using namespace kvs::testing;

constexpr int kSteps = 5, kWindow = 4;
constexpr std::size_t kPooledBudget = 600;  // under the 1,152-byte map: pooled in 3 x 3 blocks

bool have_h5py() { return std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") == 0; }

// -B: no __pycache__ in the checkout from importing kvscope_trace.
std::string python(const std::string& args) { return test::run_command("/usr/bin/python3 -B " + args); }

// Python code (no single quotes in it) run with scripts/ on the path (kvscope_trace importable).
std::string python_code(const std::string& code, const std::string& args = "") {
  return python("-c 'import sys; sys.path.insert(0, \"" + test::source_path("scripts") + "\"); " + code + "'" + args);
}

void record(const std::string& path, bool float16, std::size_t budget) {
  std::mt19937 rng(9);
  const Prompt p = make_prompt(rng);
  TraceRecorder rec(path, tiny_meta(float16), kSteps, budget, kWindow);
  record_synthetic(rec, rng, p, kSteps);
  rec.finish(text_of);
}

// Records a trace and rewrites it through kvscope_trace.py; returns {original, rewritten}.
std::pair<std::string, std::string> record_and_rewrite(const TempDir& dir, bool float16, std::size_t budget) {
  const std::string a = dir.file("kvscope.h5"), b = dir.file("rewritten.h5");
  record(a, float16, budget);
  const std::string out = python(test::source_path("tests/python/rewrite_trace.py") + " " + a + " " + b);
  EXPECT_EQ(out, "OK\n");
  return {a, b};
}

void expect_same_meta(const TraceMeta& got, const TraceMeta& want) {
  EXPECT_EQ(got.schema_version, want.schema_version);
  EXPECT_EQ(got.writer_version, want.writer_version);
  EXPECT_EQ(got.created, want.created);
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.model_path, want.model_path);
  EXPECT_EQ(got.tokenizer_path, want.tokenizer_path);
  EXPECT_EQ(got.arch, want.arch);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.device_dtype, want.device_dtype);
  EXPECT_EQ(got.shape.n_layers, want.shape.n_layers);
  EXPECT_EQ(got.shape.n_heads, want.shape.n_heads);
  EXPECT_EQ(got.shape.n_kv_heads, want.shape.n_kv_heads);
  EXPECT_EQ(got.shape.head_dim, want.shape.head_dim);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.prompt_len, want.prompt_len);
  EXPECT_EQ(got.n_steps, want.n_steps);
  EXPECT_EQ(got.prompt, want.prompt);
  EXPECT_EQ(got.temperature, want.temperature);
  EXPECT_EQ(got.top_p, want.top_p);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.decode_dtype, want.decode_dtype);
  EXPECT_EQ(got.has_prefill_map, want.has_prefill_map);
  EXPECT_EQ(got.capture_note, want.capture_note);
  EXPECT_EQ(got.recorded_under, want.recorded_under);
}

// Every array the writer writes, read through TraceReader, equal bit for bit.
void expect_same_trace(const TraceReader& got, const TraceReader& want) {
  expect_same_meta(got.meta(), want.meta());
  EXPECT_EQ(got.token_ids(), want.token_ids());
  EXPECT_EQ(got.token_texts(), want.token_texts());
  EXPECT_EQ(got.decode_query_pos(), want.decode_query_pos());
  const TraceMeta& m = want.meta();
  for (int s = 0; s < m.n_steps; ++s) {
    std::vector<float> rows_got, lse_got, rows_want, lse_want;
    got.read_decode_step(s, rows_got, lse_got);
    want.read_decode_step(s, rows_want, lse_want);
    EXPECT_EQ(rows_got, rows_want) << "step " << s;
    EXPECT_EQ(lse_got, lse_want) << "step " << s;
  }
  ASSERT_TRUE(got.has_prefill_evidence());
  const PrefillEvidence eg = got.read_prefill(), ew = want.read_prefill();
  EXPECT_EQ(eg.prompt_len, ew.prompt_len);
  EXPECT_EQ(eg.window, ew.window);
  EXPECT_EQ(eg.colsum, ew.colsum);
  EXPECT_EQ(eg.window_rows, ew.window_rows);
  EXPECT_EQ(eg.window_lse, ew.window_lse);
  EXPECT_TRUE(eg.key_scores.empty());
  for (int l = 0; l < m.shape.n_layers; ++l)
    for (int h = 0; h < m.shape.n_heads; ++h) {
      EXPECT_EQ(got.read_prefill_map(l, h), want.read_prefill_map(l, h)) << l << "," << h;
      const PooledMap pg = got.read_prefill_pooled(l, h), pw = want.read_prefill_pooled(l, h);
      EXPECT_EQ(pg.block, pw.block);
      EXPECT_EQ(pg.n, pw.n);
      EXPECT_EQ(pg.cells, pw.cells) << l << "," << h;
    }
}

std::vector<RunData> simulate_h2o_snapkv(const std::string& path) {
  TraceReader r(path);
  auto h2o = make_policy(parse_policy_spec("h2o", 4), r.meta().shape);
  auto snapkv = make_policy(parse_policy_spec("snapkv:window=2", 4), r.meta().shape);
  Policy* policies[] = {h2o.get(), snapkv.get()};
  return simulate(r, policies, SimulateOptions{});
}

// The runs of both traces equal, and H2O evicted something (recall below 1 at some step).
void expect_same_simulation(const std::string& a, const std::string& b) {
  const std::vector<RunData> ra = simulate_h2o_snapkv(a), rb = simulate_h2o_snapkv(b);
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(rb.size(), 2u);
  for (int i = 0; i < 2; ++i) expect_same_run(rb[i], ra[i], true);
  const auto recall = std::find_if(ra[0].metrics.begin(), ra[0].metrics.end(),
                                   [](const NamedArray& x) { return x.name == "recall"; });
  ASSERT_NE(recall, ra[0].metrics.end());
  EXPECT_LT(*std::min_element(recall->data.begin(), recall->data.end()), 0.99f);
  EXPECT_GT(*std::min_element(recall->data.begin(), recall->data.end()), 0.0f);
}

// `kvscope info` and `kvscope simulate` take the rewritten trace; the command line's runs on both
// traces are equal.
void expect_cli_accepts(const TempDir& dir, const std::string& a, const std::string& b) {
  const std::string bin = test::kvscope_binary();
  const std::string info = test::run_command(bin + " info " + b);
  EXPECT_EQ(info.find("exit status"), std::string::npos) << info;
  EXPECT_NE(info.find("synthetic"), std::string::npos) << info;
  for (const std::string& path : {a, b}) {
    const std::string out = test::run_command(bin + " simulate " + path + " --policy h2o --policy tova --budget 4");
    EXPECT_EQ(out.find("exit status"), std::string::npos) << out;
  }
  TraceReader ra(a), rb(b);
  ASSERT_EQ(rb.run_names(), ra.run_names());
  ASSERT_EQ(ra.run_names().size(), 2u);
  for (const std::string& name : ra.run_names())
    expect_same_run(rb.read_run(name, true), ra.read_run(name, true), true);
  EXPECT_EQ(dir.entries().size(), 2u);  // no temporary file left
}

TEST(H5pyWriterRewrite, Float32WithPrefillMap) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  const auto [a, b] = record_and_rewrite(dir, false, kDefaultCaptureBudget);
  {
    TraceReader ra(a), rb(b);
    ASSERT_TRUE(ra.meta().has_prefill_map);
    EXPECT_EQ(rb.meta().n_steps, kSteps);
    EXPECT_EQ(rb.meta().decode_dtype, "float32");
    EXPECT_EQ(rb.read_prefill_pooled(0, 0).block, 0);
    const std::vector<float> map = rb.read_prefill_map(1, 2);
    ASSERT_EQ(map.size(), (size_t)kP * kP);
    EXPECT_GT(map[kP], 0.0f);  // query 1 attends key 0
    expect_same_trace(rb, ra);
  }
  expect_same_simulation(a, b);
  expect_cli_accepts(dir, a, b);
}

TEST(H5pyWriterRewrite, Float16ReductionsOnly) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  const auto [a, b] = record_and_rewrite(dir, true, kPooledBudget);
  {
    TraceReader ra(a), rb(b);
    ASSERT_FALSE(ra.meta().has_prefill_map);
    EXPECT_EQ(rb.meta().decode_dtype, "float16");
    EXPECT_NE(rb.meta().capture_note.find("pooled in 3 x 3 blocks"), std::string::npos) << rb.meta().capture_note;
    EXPECT_TRUE(rb.read_prefill_map(0, 0).empty());
    const PooledMap pooled = rb.read_prefill_pooled(1, 3);
    EXPECT_EQ(pooled.block, 3);
    EXPECT_EQ(pooled.n, 2);
    EXPECT_GT(pooled.cells[2], 0.0f);  // queries 3..5 on keys 0..2
    expect_same_trace(rb, ra);
  }
  expect_same_simulation(a, b);
  expect_cli_accepts(dir, a, b);
}

// capture_plan() keeps the map or pools it exactly as the recorder does: the same note, and
// pool_block_for's block at shapes of real models.
TEST(H5pyWriterRewrite, CapturePlanIsTheRecorders) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  for (std::size_t budget : {kDefaultCaptureBudget, std::size_t{1152}, std::size_t{1151}, kPooledBudget}) {
    TraceRecorder rec(dir.file("plan.h5"), tiny_meta(), kSteps, budget, kWindow);
    const std::string out = python_code("import kvscope_trace as k; p = k.capture_plan(" + std::to_string(kL) + ", " +
                                        std::to_string(kH) + ", " + std::to_string(kP) + ", " +
                                        std::to_string(budget) + ", " + std::to_string(kWindow) +
                                        "); print(p.full_map, p.note)");
    EXPECT_EQ(out, std::string(rec.meta().has_prefill_map ? "True" : "False") + " " + rec.capture_note() + "\n");
  }
  // (P, L, H, budget): SmolLM2 at 4K tokens, an 8B shape at 32K, a 70B shape, a short prompt.
  for (const auto& [P, L, H, budget] : {std::tuple{4096, 30, 9, 256 << 20}, std::tuple{32768, 32, 32, 256 << 20},
                                        std::tuple{8000, 80, 64, 64 << 20}, std::tuple{700, 2, 2, 1 << 10}}) {
    const int want = pool_block_for(P, L, H, (std::size_t)budget / 4);
    const std::string args = std::to_string(L) + ", " + std::to_string(H) + ", " + std::to_string(P) + ", " +
                             std::to_string(budget);
    const std::string out = python_code("import kvscope_trace as k; print(k.capture_plan(" + args + ").pool_block)");
    EXPECT_EQ(out, std::to_string(want) + "\n") << P << " tokens";
  }
}

std::string hex(const std::string& bytes) {
  std::string out;
  char buf[3];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// token_text() gives a token's bytes the /tokens/text that KVScope's tokenizers give them.
TEST(H5pyWriterRewrite, TokenTextIsKVScopes) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  const std::vector<std::string> tokens = {
      "a", " the", "\n", "\t\r", "\xE2\x96\x81h\xC3\xA9llo", "\xE2\x96", "\x96\x81", "\x80", "\xC3", "\xFF", "\xF8",
      std::string("\0x", 2), "\xF0\x9F\x99\x82", "\xF0\x9F", "a\xE6\x97\xA5\xE6", "<|im_end|>", "\x7F",
      "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82x"};  // overlong, surrogate, past U+10FFFF, cut
  std::string args, want;
  for (const std::string& t : tokens) {
    args += " " + hex(t);
    want += hex(token_text_of_bytes(t)) + "\n";
  }
  const std::string code =
      "import kvscope_trace as k; [print(k.token_text(bytes.fromhex(h)).encode().hex()) for h in sys.argv[1:]]";
  const std::string out = python_code(code, args);
  EXPECT_EQ(out, want);
}

}  // namespace
}  // namespace kvs
