// `kvscope rerun` and `kvscope record --policy` end to end on stories260K: live runs appended
// with eviction="real" in both modes and with in-cache RoPE, and bad input (parameters that do
// not fit the model) answered with one line, exit code 2 and the trace left byte-identical.
#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/duo_pattern.h"
#include "analysis/policy.h"
#include "analysis/trace.h"
#include "cli_util.h"
#include "inference/cuda_backend.h"
#include "inference/json.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

using namespace kvs;
using namespace kvs::cli_test;

namespace {

constexpr int kSteps = 20;

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class CliRerun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(stories_bin())) GTEST_SKIP() << "stories260K model files absent";
    trace_ = dir_.file("t.h5");
    const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     std::to_string(kSteps), "--out", trace_, "--quiet", "--threads", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  CliResult rerun(std::vector<std::string> extra) {
    std::vector<std::string> args{"rerun", trace_, "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_kvscope(args);
  }
  // Checks /runs/<name> is a complete live run of the trace.
  void expect_live_run(const std::string& name, const std::string& mode, int budget) {
    SCOPED_TRACE(name);
    TraceReader tr(trace_);
    ASSERT_TRUE(has(tr.run_names(), name));
    const TraceMeta& m = tr.meta();
    const RunData r = tr.read_run(name, true);
    EXPECT_EQ(r.eviction, "real");
    EXPECT_EQ(r.mode, mode);
    EXPECT_EQ(r.device, cuda_usable() ? "cuda" : "cpu");  // --device auto
    EXPECT_EQ(r.device_dtype, "fp32");                     // the CPU's, or auto's for a model this small
    EXPECT_EQ(r.budget, budget);
    const size_t S = m.n_steps, L = m.shape.n_layers, H = m.shape.n_heads, Hkv = m.shape.n_kv_heads, T = m.total_len();
    EXPECT_EQ(S, static_cast<size_t>(kSteps));
    EXPECT_EQ(r.kept.size(), S * L * Hkv * T);
    EXPECT_EQ(r.attention.size(), S * L * H * T);
    EXPECT_EQ(r.lse.size(), S * L * H);
    EXPECT_EQ(r.tokens.size(), T);
    EXPECT_FALSE(r.text.empty());
    auto find = [&](const std::string& metric) {
      return std::find_if(r.metrics.begin(), r.metrics.end(), [&](const NamedArray& a) { return a.name == metric; });
    };
    for (const std::string metric : {"kl", "top1_agree", "ref_logprob"}) {
      ASSERT_NE(find(metric), r.metrics.end()) << metric;
      EXPECT_EQ(find(metric)->data.size(), S) << metric;
    }
    // The simulator's metrics too, per (step, layer, KV head), against the trace's rows.
    for (const std::string metric : {"recall", "topk_miss", "kept", "evicted", "inactive", "kv_bytes", "paged_bytes_freed"}) {
      ASSERT_NE(find(metric), r.metrics.end()) << metric;
      EXPECT_EQ(find(metric)->dims, (std::vector<uint64_t>{S, L, Hkv})) << metric;
    }
    for (float recall : find("recall")->data)
      if (!std::isnan(recall)) {
        EXPECT_GT(recall, 0.0f);
        EXPECT_LE(recall, 1.0f + 1e-5f);
      }
    EXPECT_TRUE(tr.has_attr("/runs/" + name, "peak_kv_bytes"));
    EXPECT_TRUE(tr.has_attr("/runs/" + name, "perplexity"));
    EXPECT_TRUE(tr.has_attr("/runs/" + name, "first_divergence"));
  }
  TempDir dir_;
  std::string trace_;
};

TEST_F(CliRerun, ForcedAndFreeRunsAreAppendedWithRealEviction) {
  CliResult r = rerun({"--policy", "streamingllm", "--policy", "h2o", "--budget", "8", "--mode", "forced"});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_live_run("streamingllm_b8_forced", "forced", 8);
  expect_live_run("h2o_b8_forced", "forced", 8);
  EXPECT_EQ(r.out.find("text:"), std::string::npos) << "a forced run's text is the trace's: not printed";
  r = rerun({"--policy", "streamingllm", "--budget", "8", "--mode", "free"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("text:"), std::string::npos) << "a free run's own text is printed";
  expect_live_run("streamingllm_b8_free", "free", 8);
  expect_live_run("streamingllm_b8_forced", "forced", 8);  // earlier runs stay
  // Forced: the run's tokens are the trace's own.
  TraceReader tr(trace_);
  const RunData forced = tr.read_run("streamingllm_b8_forced", false);
  const std::vector<int32_t> ids = tr.token_ids();
  EXPECT_EQ(forced.tokens, ids);
  // StreamingLLM keeps the same sets live and simulated, so the live run's recall, counts and
  // bytes against the trace's rows are the simulated run's, value for value.
  ASSERT_EQ(run_kvscope({"simulate", trace_, "--policy", "streamingllm", "--budget", "8"}).code, 0);
  TraceReader after(trace_);
  const RunData live = after.read_run("streamingllm_b8_forced", true), sim = after.read_run("streamingllm_b8", true);
  EXPECT_EQ(live.kept, sim.kept);
  auto metric = [](const RunData& run, const std::string& name) {
    for (const NamedArray& a : run.metrics)
      if (a.name == name) return a.data;
    ADD_FAILURE() << run.name << " has no " << name;
    return std::vector<float>();
  };
  for (const char* name : {"recall", "topk_miss", "kept", "evicted", "kv_bytes", "paged_bytes_freed"})
    EXPECT_EQ(metric(live, name), metric(sim, name)) << name;
  // Free: from the step fed the first token that differs, the trace's rows belong to another text.
  const RunData free_run = after.read_run("streamingllm_b8_free", false);
  const int P = after.meta().prompt_len;
  int differs = 0;
  while (P + differs < static_cast<int>(ids.size()) && free_run.tokens[P + differs] == ids[P + differs]) ++differs;
  const std::vector<float> recall = metric(free_run, "recall");
  const size_t per_step = recall.size() / after.meta().n_steps;
  for (size_t i = 0; i < recall.size(); ++i) EXPECT_EQ(std::isnan(recall[i]), i / per_step >= static_cast<size_t>(differs)) << i;
}

// A free run's line mixes two kinds of means: its comparisons with the trace (recall, kl, ...)
// stop where its text leaves the trace's, its counts cover all its steps. The heading says which.
// --json names where each live run ran and what it stored weights and cache in, as the trace does.
TEST_F(CliRerun, JsonNamesTheEngine) {
  const CliResult r = rerun({"--policy", "window", "--budget", "8", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out, "kvscope rerun --json");
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j.items()[0].get_string("device", ""), cuda_usable() ? "cuda" : "cpu");
  EXPECT_EQ(j.items()[0].get_string("device_dtype", ""), "fp32");
}

TEST_F(CliRerun, FreeRunHeadingNamesTheMetricsMeanOverComparedStepsOnly) {
  const CliResult r = rerun({"--policy", "streamingllm", "--budget", "4", "--mode", "free"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(trace_);
  const RunData run = tr.read_run("streamingllm_b4_free", false);
  double compared = -1.0;
  for (const auto& [k, v] : run.scalars)
    if (k == "compared_steps") compared = v;
  ASSERT_GE(compared, 0.0);
  ASSERT_LT(compared, tr.run_steps(run.name)) << "the test needs a run whose text leaves the trace's";
  const std::string heading = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(heading.find("(a free run's compared ones)"), std::string::npos) << heading;
  EXPECT_NE(heading.find("a free run's recall, topk_miss, kl, top1_agree only over its compared steps"),
            std::string::npos) << heading;
  // kept is a mean over every step of the run: its own cache, whatever text it wrote.
  const NamedArray* kept = nullptr;
  for (const NamedArray& m : run.metrics)
    if (m.name == "kept") kept = &m;
  ASSERT_NE(kept, nullptr);
  double sum = 0.0;
  for (float v : kept->data) sum += v;
  char expect[64];
  std::snprintf(expect, sizeof expect, "  kept %.4g ", sum / kept->data.size());
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
}

// A live run's scalars read as sentences: its perplexity beside the full cache's on the same
// steps, where it first differs, its memory against the full cache's, each from the stored scalars.
TEST_F(CliRerun, LiveRunScalarsArePrintedBesideTheFullCaches) {
  const CliResult r = rerun({"--policy", "streamingllm", "--policy", "full", "--budget", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(trace_);
  const RunData run = tr.read_run("streamingllm_b4_forced", false);
  std::map<std::string, double> sc(run.scalars.begin(), run.scalars.end());
  const int steps = tr.run_steps(run.name);
  ASSERT_EQ(sc.at("compared_steps"), steps);
  char expect[256];
  std::snprintf(expect, sizeof expect, "\n  output: perplexity %.4g (full cache %.4g) over %d compared steps; ",
                sc.at("perplexity"), sc.at("full_perplexity"), steps);
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
  std::snprintf(expect, sizeof expect, "\n  memory: peak %.1f KiB (full cache %.1f KiB, ratio %.3g); ",
                sc.at("peak_kv_bytes") / 1024, sc.at("full_peak_kv_bytes") / 1024, sc.at("peak_kv_ratio"));
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("its top-1 never differs from the full cache's\n"), std::string::npos)
      << "the full cache's own run: " << r.out;
  EXPECT_EQ(r.out.find("peak_kv_bytes"), std::string::npos) << "raw scalar names are for --json";
}

TEST_F(CliRerun, EveryPolicyRerunsInOneCommand) {
  // KVzip's scores come from the model (the trace has none), DuoAttention's gates are profiled
  // from the trace, OmniKV's filter layers are chosen on the trace's layer similarity.
  std::vector<std::string> args{"--budget", "8", "--mode", "forced"};
  for (const std::string& name : policy_names()) {
    args.push_back("--policy");
    args.push_back(name);
  }
  const CliResult r = rerun(args);
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(trace_);
  const std::vector<std::string> runs = tr.run_names();
  for (const std::string& name : policy_names()) {
    // OmniKV's name carries the filter layers chosen for it (omnikv_filters<...>_b8).
    const std::string suffix = name == "full" ? "_forced" : "_b8_forced";
    auto it = std::find_if(runs.begin(), runs.end(), [&](const std::string& r) {
      return r.rfind(name + "_", 0) == 0 && r.size() >= suffix.size() && r.compare(r.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
    ASSERT_NE(it, runs.end()) << name;
    EXPECT_EQ(tr.read_run(*it, false).eviction, "real") << *it;
  }
  EXPECT_NE(tr.read_run("duoattention_b8_forced", false).params_json.find("profiled from trace"), std::string::npos);
}

// The runs' own rows are held until appended (S x L x H x T floats a run: 13.6 GB for a SmolLM2
// run of 2K steps after a 4K prompt), so past --attention-budget-mb they are left out with a note;
// the kept sets and metrics stay.
TEST_F(CliRerun, RowsPastTheAttentionBudgetAreNotKept) {
  CliResult r = rerun({"--policy", "h2o", "--budget", "8", "--attention-budget-mb", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("attention budget"), std::string::npos) << r.err;
  EXPECT_FALSE(TraceReader(trace_).read_run("h2o_b8_forced", true).attention.empty());
  r = rerun({"--policy", "streamingllm", "--policy", "h2o", "--budget", "8", "--attention-budget-mb", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("exceed the attention budget of 0 MiB"), std::string::npos) << r.err;
  TraceReader tr(trace_);
  for (const std::string name : {"streamingllm_b8_forced", "h2o_b8_forced"}) {
    const RunData run = tr.read_run(name, true);
    EXPECT_TRUE(run.attention.empty()) << name;
    EXPECT_EQ(run.kept.size(), static_cast<size_t>(kSteps) * tr.meta().shape.n_layers * tr.meta().shape.n_kv_heads *
                                   tr.meta().total_len()) << name;
    EXPECT_FALSE(run.metrics.empty()) << name;
  }
}

// A flag that would be ignored is refused, as --budget nothing uses is: the trace is unchanged.
TEST_F(CliRerun, FlagsThatWouldBeIgnoredAreRefused) {
  const std::string before = read_bytes(trace_);
  EXPECT_TRUE(
      is_input_error(rerun({"--policy", "h2o", "--budget", "8", "--no-attention", "--attention-budget-mb", "5"}),
                     "--attention-budget-mb", "is not used: --no-attention keeps no rows"));
  EXPECT_TRUE(is_input_error(rerun({"--policy", "h2o", "--budget", "8", "--device", "cpu", "--gpu-dtype", "fp16"}),
                             "--gpu-dtype", "is not used: --device cpu runs the model on the CPU (--kv-dtype sets its cache)"));
  EXPECT_EQ(read_bytes(trace_), before);
}

TEST_F(CliRerun, RopeInCacheRunIsNamedAndMarked) {
  const CliResult r = rerun({"--policy", "streamingllm", "--budget", "8", "--rope-in-cache"});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_live_run("streamingllm_b8_forced_rerotated", "forced", 8);
  TraceReader tr(trace_);
  EXPECT_NE(tr.read_run("streamingllm_b8_forced_rerotated", false).params_json.find("\"rope\":\"in-cache\""),
            std::string::npos);
}

TEST_F(CliRerun, RecordUnderAPolicyStoresTheLiveRun) {
  const std::string out = dir_.file("p.h5");
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   std::to_string(kSteps), "--out", out, "--quiet", "--threads", "1", "--policy",
                                   "streamingllm", "--budget", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(out);
  ASSERT_TRUE(has(tr.run_names(), "streamingllm_b8_free"));
  const RunData run = tr.read_run("streamingllm_b8_free", false);
  EXPECT_EQ(run.eviction, "real");
  EXPECT_EQ(run.tokens, tr.token_ids());  // the trace is the policy run's own generation
  EXPECT_TRUE(r.err.empty()) << "--quiet: " << r.err;
}

// Without --quiet, record under a policy says on stderr what its evictions did against the full
// cache, as rerun does under its line: the output and memory lines from the stored scalars.
TEST_F(CliRerun, RecordUnderAPolicyPrintsItsRunsOutputAndMemory) {
  const std::string out = dir_.file("p.h5");
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   std::to_string(kSteps), "--out", out, "--threads", "1", "--policy", "streamingllm",
                                   "--budget", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  const RunData run = TraceReader(out).read_run("streamingllm_b8_free", false);
  std::map<std::string, double> sc(run.scalars.begin(), run.scalars.end());
  char expect[128];
  std::snprintf(expect, sizeof expect, "\n  output: perplexity %.4g (full cache %.4g) over ", sc.at("perplexity"),
                sc.at("full_perplexity"));
  EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\n  memory: peak "), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("output: perplexity"), std::string::npos) << "stdout keeps the text alone";
}

TEST_F(CliRerun, OmnikvFilterBeyondTheLastLayerIsAOneLineErrorAndAppendsNothing) {
  const std::string before = read_bytes(trace_);
  const CliResult r = rerun({"--policy", "omnikv:filters=9", "--budget", "8"});
  EXPECT_TRUE(is_input_error(r, "omnikv", "beyond the last layer"));
  EXPECT_EQ(read_bytes(trace_), before);
}

TEST_F(CliRerun, AlphaFolderForAnotherHeadCountIsAOneLineErrorAndAppendsNothing) {
  DuoPattern p;
  p.n_layers = 5;
  p.n_kv_heads = 3;  // stories260K has 4 KV heads
  p.alpha.assign(15, 0.5f);
  const std::string pattern = dir_.file("pattern");
  write_duo_pattern(pattern, p, "test");
  const std::string before = read_bytes(trace_);
  CliResult r = rerun({"--policy", "duoattention", "--budget", "8", "--alpha", pattern});
  EXPECT_TRUE(is_input_error(r, pattern, "3 KV heads"));
  EXPECT_EQ(read_bytes(trace_), before);
  r = rerun({"--policy", "duoattention:pattern=" + pattern, "--budget", "8"});
  EXPECT_TRUE(is_input_error(r, pattern, "3 KV heads"));
  EXPECT_EQ(read_bytes(trace_), before);
  EXPECT_EQ(dir_.entries(), (std::vector<std::string>{"pattern", "t.h5"}));  // no temporary left behind
}

// DuoAttention's static path (prefill_chunk): a live run feeds the prompt in chunks, its streaming
// heads trimmed between them. rerun and record under the policy store it; the kept sets at the
// decode steps are the whole prefill's, the cache peaks lower, the note says what was chunked.
TEST_F(CliRerun, DuoAttentionFeedsThePromptInChunksWhenAsked) {
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
      "friends. One day, she saw a big red ball.";
  const std::string trace = dir_.file("long.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", stories_bin(), "--prompt", prompt, "--steps", "6", "--out", trace,
                         "--quiet", "--threads", "1"}).code, 0);
  const int P = TraceReader(trace).meta().prompt_len;
  ASSERT_GT(P, 24);
  const CliResult r = run_kvscope({"rerun", trace, "--threads", "1", "--budget", "8", "--policy",
                                   "duoattention:prefill_chunk=8", "--policy", "duoattention"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("a live run feeds the " + std::to_string(P) + "-token prompt in " + std::to_string((P + 7) / 8) +
                       " chunks of 8"),
            std::string::npos)
      << r.err;
  TraceReader tr(trace);
  const RunData chunked = tr.read_run("duoattention_prefill_chunk8_b8_forced", false);
  const RunData whole = tr.read_run("duoattention_b8_forced", false);
  EXPECT_NE(chunked.params_json.find("\"prefill_chunk\":8"), std::string::npos) << chunked.params_json;
  EXPECT_EQ(chunked.kept, whole.kept);
  std::map<std::string, double> c(chunked.scalars.begin(), chunked.scalars.end()),
      w(whole.scalars.begin(), whole.scalars.end());
  EXPECT_LT(c.at("peak_kv_bytes"), w.at("peak_kv_bytes"));

  // Recorded under it: the trace's prompt attention is the whole prefill's, its decode the run's.
  DuoPattern pattern;
  pattern.n_layers = 5;
  pattern.n_kv_heads = 4;
  for (int i = 0; i < 20; ++i) pattern.alpha.push_back(static_cast<float>(i % 7) / 7.0f);
  const std::string dir = dir_.file("pattern");
  write_duo_pattern(dir, pattern, "test");
  const std::string out = dir_.file("p.h5");
  const CliResult rec = run_kvscope({"record", "--model", stories_bin(), "--prompt", prompt, "--steps", "6", "--out",
                                     out, "--quiet", "--threads", "1", "--budget", "8", "--policy",
                                     "duoattention:prefill_chunk=8,pattern=" + dir});
  ASSERT_EQ(rec.code, 0) << rec.err;
  TraceReader recorded(out);
  EXPECT_NE(recorded.meta().capture_note.find("chunks"), std::string::npos) << recorded.meta().capture_note;
  const std::vector<std::string> runs = recorded.run_names();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(recorded.read_run(runs[0], false).eviction, "real");
}

// A free run ends where its model ends the text, as record does: SmolLM2 without its attention
// sinks loses the thread and chooses <|im_end|> within a few steps (it went on past it, its text
// turning to "...next morning.\nistant\nThe river..."). The run then holds fewer steps than
// the trace, none of them end-of-text. Skipped without the model.
TEST(CliRerunSmolLM2, FreeRunEndsAtEndOfText) {
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  TempDir dir;
  const std::string trace = dir.file("sink.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", model, "--prompt-file", test::source_path("assets/prompts/sink.txt"),
                         "--chat", "--steps", "40", "--out", trace, "--quiet"})
                .code,
            0);
  const CliResult r = run_kvscope({"rerun", trace, "--budget", "32", "--mode", "free", "--policy",
                                   "streamingllm:sinks=0", "--no-attention"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(trace);
  const RunData run = tr.read_run("streamingllm_sinks0_b32_free", true);
  const int P = tr.meta().prompt_len, n = static_cast<int>(run.tokens.size()) - P;
  EXPECT_LT(n, tr.meta().n_steps) << run.text;
  EXPECT_EQ(std::count(run.tokens.begin() + P, run.tokens.end(), 2), 0) << "<|im_end|> is id 2";
  EXPECT_EQ(run.text.find("istant"), std::string::npos) << run.text;
  const size_t per_step = run.kept.size() / std::max(n, 1);
  EXPECT_EQ(per_step * n, run.kept.size());
  for (const NamedArray& m : run.metrics) EXPECT_EQ(m.dims[0], static_cast<uint64_t>(n)) << m.name;
}

// A greedy free run's first divergence is the first step whose top-1 differs from the full
// cache's: the step that chose the first differing token, or the last step, whose choice neither
// run feeds (window_b8 on 16 steps of this story differs there alone: it was reported as never).
TEST_F(CliRerun, FreeRunsFirstDivergenceIsTheFirstStepWhoseTop1Differs) {
  const std::string trace = dir_.file("16.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps", "16", "--out",
                         trace, "--quiet", "--threads", "1"})
                .code,
            0);
  const CliResult r = run_kvscope({"rerun", trace, "--threads", "1", "--budget", "8", "--mode", "free", "--policy",
                                   "window", "--policy", "streamingllm", "--policy", "h2o", "--no-attention"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader tr(trace);
  for (const std::string name : {"window_b8_free", "streamingllm_b8_free", "h2o_b8_free"}) {
    const RunData run = tr.read_run(name, false);
    const auto top1 = std::find_if(run.metrics.begin(), run.metrics.end(),
                                   [](const NamedArray& m) { return m.name == "top1_agree"; });
    ASSERT_NE(top1, run.metrics.end()) << name;
    double first = -1;
    for (size_t s = 0; s < top1->data.size() && first < 0; ++s)
      if (top1->data[s] == 0.0f) first = static_cast<double>(s);
    const std::map<std::string, double> sc(run.scalars.begin(), run.scalars.end());
    EXPECT_EQ(sc.at("first_divergence"), first) << name;
    if (name == "window_b8_free") {
      EXPECT_EQ(first, 15.0) << "the case this test was written for";
    }
  }
}

// A free run that ends early is held against the full cache over its own steps: its peak beside
// the full cache's at its last step, not at the recording's end (10 KiB against 432 KiB read as
// a ratio of 0.024 when the run held 72 of the recording's 341 steps; here 72 of 100).
TEST_F(CliRerun, AFreeRunThatEndsEarlyComparesItsPeakOverItsOwnSteps) {
  const std::string trace = dir_.file("long.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps", "100",
                         "--out", trace, "--quiet", "--threads", "1"})
                .code,
            0);
  ASSERT_EQ(run_kvscope({"rerun", trace, "--threads", "1", "--budget", "8", "--mode", "free", "--policy", "window",
                         "--no-attention"})
                .code,
            0);
  TraceReader tr(trace);
  const TraceMeta& m = tr.meta();
  const RunData run = tr.read_run("window_b8_free", false);
  const int P = m.prompt_len, n = static_cast<int>(run.tokens.size()) - P;
  ASSERT_LT(n, m.n_steps) << "the window run no longer ends early: " << run.text;
  const std::map<std::string, double> sc(run.scalars.begin(), run.scalars.end());
  const double per_token = static_cast<double>(m.shape.kv_bytes_per_entry()) * m.shape.n_layers * m.shape.n_kv_heads;
  EXPECT_EQ(sc.at("full_peak_kv_bytes"), per_token * (P + n));
  EXPECT_DOUBLE_EQ(sc.at("peak_kv_ratio"), sc.at("peak_kv_bytes") / sc.at("full_peak_kv_bytes"));
}

// A trace recorded under a policy keeps that run; a re-run of the same name and mode would have
// replaced it (and the trace's note would name a run that was no longer the recording's).
TEST_F(CliRerun, ARerunDoesNotReplaceTheRunATraceWasRecordedUnder) {
  const std::string out = dir_.file("p.h5");
  ASSERT_EQ(run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps", "8", "--out",
                         out, "--quiet", "--threads", "1", "--policy", "h2o", "--budget", "8"})
                .code,
            0);
  const std::string before = read_bytes(out);
  const CliResult r = run_kvscope({"rerun", out, "--policy", "h2o", "--budget", "8", "--mode", "free"});
  EXPECT_TRUE(is_input_error(r, "--policy h2o", "the run this trace was recorded under"));
  EXPECT_EQ(read_bytes(out), before);
  const CliResult forced = run_kvscope({"rerun", out, "--policy", "h2o", "--budget", "8", "--threads", "1"});
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(forced.err.find("a free run's divergence is from that run's text"), std::string::npos) << forced.err;
  EXPECT_TRUE(has(TraceReader(out).run_names(), "h2o_b8_free"));
}

TEST_F(CliRerun, BadModeIsAOneLineError) {
  const std::string before = read_bytes(trace_);
  const CliResult r = rerun({"--policy", "h2o", "--budget", "8", "--mode", "sideways"});
  EXPECT_TRUE(is_input_error(r, "--mode", "forced or free"));
  EXPECT_EQ(read_bytes(trace_), before);
}

}  // namespace
