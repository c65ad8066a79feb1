// End-to-end tests of `kvscope simulate`, `layers` and `heads` (issue 3) on a stories260K trace
// recorded by the CLI: every policy in one pass, StreamingLLM's exact kept sets, recall 1 when the
// budget covers the context, bad input that leaves the trace byte-identical, concurrent appends
// that all land, appends through links keeping the mode, and --alpha-out sparing files it did
// not write.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "analysis/policy.h"
#include "analysis/retrieval_score.h"
#include "app/cli/heads_model.h"
#include "inference/errors.h"
#include "analysis/trace.h"
#include "cli_util.h"
#include "inference/json.h"
#include "tests/flock_waiters.h"

namespace kvs::cli_test {
namespace {

constexpr int kSteps = 24;
const char* kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball.";

class CliSimulate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const CliResult r = record_stories(dir_->file("base.h5"), kPrompt, kSteps);
    ASSERT_EQ(r.code, 0) << r.err;
    TraceReader t(dir_->file("base.h5"));
    prompt_len_ = t.meta().prompt_len;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A private copy of the recorded trace.
  std::string fresh_trace(const std::string& name = "t.h5") {
    const std::string path = work_.file(name);
    write_bytes(path, read_bytes(dir_->file("base.h5")));
    return path;
  }
  static Json parse_json(const CliResult& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out, "stdout");
  }
  static std::vector<double> numbers(const Json& j, const char* key) {
    std::vector<double> v;
    const Json* a = j.find(key);
    EXPECT_TRUE(a && a->is_array()) << key;
    if (a)
      for (const Json& x : a->items()) v.push_back(x.as_number());
    return v;
  }
  // The filter layers `kvscope layers` picks with its defaults, as "f1,f2,...".
  static std::string optimal_filters(const std::string& trace) {
    const Json j = parse_json(run_kvscope({"layers", trace, "--json"}));
    std::string out;
    const Json* opt = j.find("optimal");
    EXPECT_TRUE(opt != nullptr);
    if (opt)
      for (double f : numbers(*opt, "filters")) {
        if (!out.empty()) out += ',';
        out += std::to_string(static_cast<int>(f));
      }
    return out;
  }
  static TempDir* dir_;
  static int prompt_len_;
  TempDir work_;
};
TempDir* CliSimulate::dir_ = nullptr;
int CliSimulate::prompt_len_ = 0;

// --policy arguments for every registered policy at `budget`, and their run names. OmniKV
// without filters takes the filter layers the optimizer of `kvscope layers` picks on the trace
// (`omnikv_filters`, comma-separated), which then name its run.
std::vector<std::string> every_policy_args(int budget, const std::string& omnikv_filters,
                                           std::vector<std::string>& run_names) {
  std::vector<std::string> args;
  for (const std::string& name : policy_names()) {
    args.push_back("--policy");
    args.push_back(name);
    PolicySpec spec = parse_policy_spec(name, budget);
    if (name == "omnikv") spec.params["filters"] = omnikv_filters;
    run_names.push_back(spec.run_name());
  }
  args.push_back("--budget");
  args.push_back(std::to_string(budget));
  return args;
}

TEST_F(CliSimulate, PromptIsLongerThanTheStreamingWindow) {
  EXPECT_GT(prompt_len_, 36 + 4);
}

TEST_F(CliSimulate, EveryPolicyAtOnceAppendsARunEach) {
  const std::string t = fresh_trace();
  std::vector<std::string> names;
  std::vector<std::string> args{"simulate", t, "--json"};
  const auto pol = every_policy_args(16, optimal_filters(t), names);
  args.insert(args.end(), pol.begin(), pol.end());
  ASSERT_EQ(names.size(), 12u);
  const Json j = parse_json(run_kvscope(args));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const Json& run = j.items()[i];
    EXPECT_EQ(run.get_string("name", ""), names[i]);
    EXPECT_EQ(run.get_number("budget", -1), names[i] == "full" ? 0 : 16) << names[i];  // full keeps everything
    EXPECT_EQ(run.get_string("eviction", ""), "simulated");
    const double recall = run.get_number("mean_recall", -1);
    EXPECT_GT(recall, 0.0) << names[i];
    EXPECT_LE(recall, 1.0 + 1e-6) << names[i];
  }
  TraceReader reader(t);
  const auto stored = reader.run_names();
  EXPECT_EQ(std::set<std::string>(stored.begin(), stored.end()), std::set<std::string>(names.begin(), names.end()));
  for (const auto& name : names) EXPECT_EQ(reader.run_steps(name), kSteps) << name;
  // The recording itself is unchanged by appending runs.
  TraceReader base(dir_->file("base.h5"));
  EXPECT_EQ(reader.token_ids(), base.token_ids());
  EXPECT_EQ(reader.meta().n_steps, kSteps);
}

// OmniKV's frac=F sets its own budget from the prompt: no --budget needed, one given for it
// alone is refused as unused, and a frac outside (0, 1] is named as the problem.
TEST_F(CliSimulate, OmniKvFracIsItsOwnBudget) {
  const std::string t = fresh_trace();
  const int k = std::max(1, static_cast<int>(0.25 * prompt_len_));
  const Json runs = parse_json(run_kvscope({"simulate", t, "--policy", "omnikv:filters=1,frac=0.25", "--json"}));
  ASSERT_EQ(runs.items().size(), 1u);
  EXPECT_EQ(runs.items()[0].get_string("name", ""), "omnikv_filters1_frac0.25_b" + std::to_string(k));
  EXPECT_EQ(runs.items()[0].get_number("budget", -1), k);
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", "omnikv:frac=0.25", "--budget", "8"}), "--budget",
                             "no --policy uses it (full keeps every token; budget=N or OmniKV's frac=F in a spec is that policy's own)"));
  for (const char* bad : {"2", "0", "abc"})
    EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", std::string("omnikv:frac=") + bad}), "--policy omnikv",
                               std::string("frac must be in (0, 1] (got '") + bad + "')"));
}

// Later simulate calls add to the runs already there; a run of the same name is replaced.
TEST_F(CliSimulate, SecondCallAppendsAndSameNameReplaces) {
  const std::string t = fresh_trace();
  ASSERT_EQ(run_kvscope({"simulate", t, "--policy", "window", "--budget", "8"}).code, 0);
  ASSERT_EQ(run_kvscope({"simulate", t, "--policy", "tova", "--budget", "8"}).code, 0);
  ASSERT_EQ(run_kvscope({"simulate", t, "--policy", "window", "--budget", "8"}).code, 0);
  TraceReader reader(t);
  EXPECT_EQ(reader.run_names(), (std::vector<std::string>{"tova_b8", "window_b8"}));
  EXPECT_EQ(work_.entries(), std::vector<std::string>{"t.h5"});
}

// SnapKV's default window (32) covers a budget of 16: the run is a plain window, and simulate
// says so on stderr, for that run only.
TEST_F(CliSimulate, NoteWhenTheWindowCoversTheBudget) {
  const std::string t = fresh_trace();
  const CliResult r = run_kvscope({"simulate", t, "--policy", "snapkv", "--policy", "snapkv:window=4", "--budget", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "kvscope: note: snapkv_b16: its window (32) covers the whole budget (16): no prompt position is "
                   "chosen by score, the last 16 prompt tokens are kept (give window=N below the budget)\n");
}

// The paged-allocation block of paged_bytes_freed is kept with the run and reported.
TEST_F(CliSimulate, BlockSizeIsStoredWithTheRun) {
  const std::string t = fresh_trace();
  const Json j = parse_json(run_kvscope({"simulate", t, "--policy", "window", "--budget", "8", "--block-size", "4", "--json"}));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j.items()[0].get_number("block_size", 0), 4);
  TraceReader reader(t);
  const RunData run = reader.read_run("window_b8", false);
  ASSERT_EQ(run.scalars.size(), 1u);
  EXPECT_EQ(run.scalars[0], (std::pair<std::string, double>{"block_size", 4.0}));
}

// The printed numbers say what they are (means over steps and (layer, KV head)); block_size, a
// setting of paged_bytes_freed, is not printed among them (it stays in --json and the trace).
TEST_F(CliSimulate, PrintedMetricsSayTheyAreMeansAndLeaveOutBlockSize) {
  const std::string t = fresh_trace();
  const CliResult r = run_kvscope({"simulate", t, "--policy", "window", "--budget", "8", "--block-size", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string heading = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(heading.find("means over the decode steps"), std::string::npos) << r.out;
  EXPECT_NE(heading.find("recall, topk_miss, kept, inactive also over (layer, KV head)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("block_size"), std::string::npos) << r.out;
  const std::string line = r.out.substr(heading.size() + 1);
  EXPECT_EQ(line.rfind("window_b8", 0), 0u) << r.out;
  EXPECT_LT(line.find("recall"), line.find("topk_miss")) << r.out;
}

// Retrieval scores are stored as each head's mean over the kept trials, with how many were kept;
// with none kept there is nothing to store, and the trace stays as it was.
TEST_F(CliSimulate, RetrievalScoresAreStoredOnlyWhenATrialWasKept) {
  const std::string t = fresh_trace();
  Model model;
  model.config.n_layers = 5;
  model.config.n_heads = 8;
  model.path = "stories.bin";
  RetrievalScores scores;
  scores.n_layers = 5;
  scores.n_heads = 8;
  scores.n_trials = 3;
  scores.trials.assign(40, {});
  const std::string before = read_bytes(t);
  EXPECT_THROW(store_retrieval_scores(t, model, scores, KvDtype::Fp32), InputError);
  EXPECT_TRUE(read_bytes(t) == before);
  for (auto& head : scores.trials) head = {0.0f, 0.0f};
  scores.trials[9] = {0.5f, 1.0f};
  store_retrieval_scores(t, model, scores, KvDtype::Fp16);
  const TraceReader reader(t);
  const NamedArray stored = reader.read_array("/heads/retrieval_score");
  EXPECT_EQ(stored.dims, (std::vector<uint64_t>{5, 8}));
  EXPECT_EQ(stored.data[9], 0.75f);
  EXPECT_EQ(stored.data[10], 0.0f);
  EXPECT_EQ(reader.read_string_attr("/heads/retrieval_score", "trials_kept"), "2 of 3");
  EXPECT_EQ(reader.read_string_attr("/heads/retrieval_score", "kv_dtype"), "fp16");
}

// One setting, one run name: "+2" and "02" are the 2 of "heavy=2".
TEST_F(CliSimulate, IntegerParametersNameRunsCanonically) {
  const std::string t = fresh_trace();
  for (const char* spec : {"h2o:heavy=+2", "h2o:heavy=02", "h2o:heavy=2"})
    ASSERT_EQ(run_kvscope({"simulate", t, "--policy", spec, "--budget", "8"}).code, 0) << spec;
  EXPECT_EQ(TraceReader(t).run_names(), std::vector<std::string>{"h2o_heavy2_b8"});
}

TEST_F(CliSimulate, StreamingLLMKeepsSinksAndRecentWindowExactly) {
  const std::string t = fresh_trace();
  const CliResult r = run_kvscope({"simulate", t, "--policy", "streamingllm:sinks=4,recent=32", "--budget", "36"});
  ASSERT_EQ(r.code, 0) << r.err;
  TraceReader reader(t);
  const ModelShape s = reader.meta().shape;
  const int T = reader.meta().total_len();
  const std::string run = "streamingllm_recent32_sinks4_b36";
  const auto qpos = reader.decode_query_pos();
  std::vector<uint8_t> kept;  // [L, Hkv, T]
  for (int step = 0; step < kSteps; ++step) {
    reader.read_run_kept_step(run, step, kept);
    ASSERT_EQ(kept.size(), static_cast<size_t>(s.n_layers) * s.n_kv_heads * T);
    const int q = qpos[step];
    ASSERT_EQ(q, prompt_len_ + step);
    for (int lg = 0; lg < s.n_layers * s.n_kv_heads; ++lg)
      for (int p = 0; p < T; ++p) {
        const uint8_t want = (p < 4 || (p >= q - 32 && p <= q)) ? 1 : 0;
        ASSERT_EQ(kept[static_cast<size_t>(lg) * T + p], want) << "step " << step << " layer/kv " << lg << " pos " << p;
      }
  }
}

TEST_F(CliSimulate, EveryPolicyRecallIsOneWhenTheBudgetCoversTheContext) {
  const std::string t = fresh_trace();
  const int budget = prompt_len_ + kSteps;
  std::vector<std::string> names;
  std::vector<std::string> args{"simulate", t};
  const auto pol = every_policy_args(budget, optimal_filters(t), names);
  args.insert(args.end(), pol.begin(), pol.end());
  const CliResult r = run_kvscope(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), static_cast<int>(names.size()) + 1) << r.out;  // a heading, a line per run
  TraceReader reader(t);
  for (const auto& name : names) {
    const RunData run = reader.read_run(name, false);
    const NamedArray* recall = nullptr;
    for (const auto& m : run.metrics)
      if (m.name == "recall") recall = &m;
    ASSERT_NE(recall, nullptr) << name;
    ASSERT_EQ(recall->data.size(), static_cast<size_t>(kSteps) * 5 * 4) << name;  // [n_steps, L, Hkv]
    for (float v : recall->data) ASSERT_NEAR(v, 1.0f, 1e-5f) << name;
  }
}

TEST_F(CliSimulate, LayersJson) {
  const std::string t = fresh_trace();
  const Json j = parse_json(run_kvscope({"layers", t, "--filters", "2", "--json"}));
  EXPECT_EQ(j.get_number("n_layers", 0), 5);
  EXPECT_GT(j.get_number("k_tokens", 0), 0);
  const auto sim = numbers(j, "similarity");
  ASSERT_EQ(sim.size(), 25u);
  for (int i = 0; i < 5; ++i)
    for (int c = 0; c < 5; ++c) {
      EXPECT_GE(sim[i * 5 + c], 0.0);
      EXPECT_LE(sim[i * 5 + c], 1.0 + 1e-6);
      // Layer c's own top-k holds the most of its mass: the diagonal is each column's maximum.
      EXPECT_GE(sim[c * 5 + c] + 1e-6, sim[i * 5 + c]) << i << "," << c;
    }
  const Json* opt = j.find("optimal");
  ASSERT_TRUE(opt && opt->is_object());
  const auto filters = numbers(*opt, "filters");
  ASSERT_EQ(filters.size(), 2u);
  EXPECT_LT(filters[0], filters[1]);
  EXPECT_GE(filters[0], 0);
  EXPECT_LT(filters[1], 5);
  const double retained = opt->get_number("retained", -1);
  const double sparse = opt->get_number("sparse_layers", -1);
  EXPECT_GE(retained, 0.0);
  EXPECT_LE(retained, sparse + 1e-6);
  const Json* roles = opt->find("roles");
  ASSERT_TRUE(roles && roles->is_array());
  EXPECT_EQ(roles->size(), 5u);
}

TEST_F(CliSimulate, HeadsJsonAndAlphaFolder) {
  const std::string t = fresh_trace();
  const std::string alpha_dir = work_.file("alpha");
  const Json j = parse_json(run_kvscope({"heads", t, "--json", "--alpha-out", alpha_dir}));
  EXPECT_EQ(j.get_number("n_layers", 0), 5);
  EXPECT_EQ(j.get_number("n_heads", 0), 8);
  EXPECT_EQ(j.get_number("n_kv_heads", 0), 4);
  EXPECT_EQ(j.get_number("steps", 0), kSteps);
  const double max_entropy = std::log(static_cast<double>(prompt_len_ + kSteps));
  for (const char* key : {"sink_mass", "locality", "entropy"}) {
    const auto v = numbers(j, key);
    ASSERT_EQ(v.size(), 40u) << key;  // [L, H]
    for (double x : v) {
      EXPECT_GE(x, 0.0) << key;
      EXPECT_LE(x, std::string(key) == "entropy" ? max_entropy : 1.0 + 1e-6) << key;
    }
  }
  const auto alpha = numbers(j, "alpha");
  ASSERT_EQ(alpha.size(), 20u);  // [L, Hkv]
  for (double a : alpha) {
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
  }
  // full_attention_heads.tsv: L lines of Hkv tab-separated gates, the same values as the JSON.
  std::istringstream tsv(read_bytes(alpha_dir + "/full_attention_heads.tsv"));
  std::string line;
  int lines = 0;
  while (std::getline(tsv, line)) {
    std::istringstream cells(line);
    std::string cell;
    int g = 0;
    while (std::getline(cells, cell, '\t')) {
      ASSERT_LT(g, 4) << line;
      EXPECT_NEAR(std::stod(cell), alpha[lines * 4 + g], 1e-6) << line;
      ++g;
    }
    EXPECT_EQ(g, 4) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 5);
  EXPECT_TRUE(fs::exists(alpha_dir + "/config.json"));
  // The folder drives DuoAttention, as pattern=DIR would, and names its run apart from the one
  // with gates profiled from the trace, which it therefore does not replace.
  ASSERT_EQ(run_kvscope({"simulate", t, "--policy", "duoattention", "--budget", "8"}).code, 0);
  const Json runs = parse_json(run_kvscope({"simulate", t, "--policy", "duoattention", "--budget", "8",
                                            "--alpha", alpha_dir, "--json"}));
  ASSERT_TRUE(runs.is_array() && runs.size() == 1u);
  EXPECT_EQ(runs.items()[0].get_string("name", ""), "duoattention_patternalpha_b8");
  const std::vector<std::string> names = TraceReader(t).run_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"duoattention_b8", "duoattention_patternalpha_b8"}));
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", "h2o", "--budget", "8", "--alpha", alpha_dir}),
                             "--alpha", "no --policy duoattention is given"));
  // A duoattention spec that gives its own gates takes none from --alpha: refused, not ignored.
  for (const std::string& spec : {"duoattention:pattern=" + alpha_dir, std::string("duoattention:gates=profiled")})
    EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", spec, "--budget", "8", "--alpha", alpha_dir}),
                               "--alpha", "is not used: every --policy duoattention gives its own gates"))
        << spec;
}

// Without /heads/alpha, plain duoattention profiles its gates from the trace: gates=profiled
// names the same run (it was duoattention_gatesprofiled_b8 beside duoattention_b8, the same
// gates under two names), so giving both is one run given twice.
TEST_F(CliSimulate, ProfiledGatesGivenOrNotAreOneRun) {
  const std::string t = fresh_trace();
  const Json runs = parse_json(run_kvscope({"simulate", t, "--policy", "duoattention:gates=profiled", "--budget", "8",
                                            "--json"}));
  ASSERT_TRUE(runs.is_array() && runs.size() == 1u);
  EXPECT_EQ(runs.items()[0].get_string("name", ""), "duoattention_b8");
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", "duoattention", "--policy",
                                          "duoattention:gates=profiled", "--budget", "8"}),
                             "--policy duoattention:gates=profiled", "given twice (run name duoattention_b8)"));
}

// α estimated on the model is stored in a trace of that model: the head grid shows it, and
// DuoAttention runs on the trace take those gates. stories260K copies none of the needles, so no
// retrieval score is stored (each would be a meaningless 0). A model of another shape is refused
// before anything runs, the trace left as it was.
TEST_F(CliSimulate, HeadsOnTheModelStoreAlphaInTheTrace) {
  const std::string t = fresh_trace();
  const Json j = parse_json(run_kvscope({"heads", t, "--model", stories_bin(), "--json"}));
  EXPECT_EQ(j.get_number("retrieval_trials_kept", -1), 0);
  ASSERT_NE(j.find("retrieval_score"), nullptr);
  EXPECT_TRUE(j.find("retrieval_score")->is_null()) << "no trial kept: no score, not zeros";
  const TraceReader reader(t);
  EXPECT_FALSE(reader.has_array("/heads/retrieval_score"));
  const CliResult text = run_kvscope({"heads", fresh_trace("text.h5"), "--model", stories_bin()});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("retrieval scores: none of the 5 needle trials was kept"), std::string::npos) << text.out;
  const std::vector<double> alpha = numbers(j, "alpha");
  ASSERT_EQ(alpha.size(), 20u);
  const NamedArray gates = reader.read_array("/heads/alpha");
  EXPECT_EQ(gates.dims, (std::vector<uint64_t>{5, 4}));
  for (size_t i = 0; i < alpha.size(); ++i) EXPECT_FLOAT_EQ(gates.data[i], (float)alpha[i]) << i;
  EXPECT_EQ(reader.run_names(), TraceReader(dir_->file("base.h5")).run_names());  // nothing else changed
  // Named for the estimated gates, beside a run whose gates are profiled from the trace.
  const Json runs = parse_json(run_kvscope({"simulate", t, "--policy", "duoattention", "--policy",
                                            "duoattention:gates=profiled", "--budget", "8", "--json"}));
  ASSERT_TRUE(runs.is_array() && runs.size() == 2u);
  EXPECT_EQ(runs.items()[0].get_string("name", ""), "duoattention_gatesestimated_b8");
  EXPECT_EQ(runs.items()[1].get_string("name", ""), "duoattention_gatesprofiled_b8");
  EXPECT_EQ(runs.items()[1].find("params")->get_string("alpha_source", ""), "profiled from trace");
  const Json* params = runs.items()[0].find("params");
  ASSERT_TRUE(params);
  EXPECT_EQ(params->get_string("alpha_source", "").rfind("trace /heads/alpha (estimated", 0), 0u)
      << params->get_string("alpha_source", "");

  const std::string other = fresh_trace("other.h5");
  const std::string before = read_bytes(other);
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", other, "--model", tiny_random_gguf()}), tiny_random_gguf(),
                             "model shape differs from the trace's"));
  EXPECT_TRUE(read_bytes(other) == before);
}

std::vector<std::string> sorted_runs(const std::string& trace) {
  std::vector<std::string> names = TraceReader(trace).run_names();
  std::sort(names.begin(), names.end());
  return names;
}

// Simulations appending to one trace at once take turns (an exclusive lock from reading the
// trace to the rename): every run lands (one used to replace the other's file, losing its run).
TEST_F(CliSimulate, ConcurrentSimulatesKeepEveryRun) {
  const std::vector<std::string> policies = {"h2o", "tova", "streamingllm", "snapkv"};
  for (int round = 0; round < 3; ++round) {
    const std::string t = fresh_trace();
    std::vector<CliResult> results(policies.size());
    std::vector<std::thread> runs;
    for (size_t i = 0; i < policies.size(); ++i)
      runs.emplace_back([&, i] { results[i] = run_kvscope({"simulate", t, "--policy", policies[i], "--budget", "8"}); });
    for (std::thread& r : runs) r.join();
    for (const CliResult& r : results) EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(sorted_runs(t), (std::vector<std::string>{"h2o_b8", "snapkv_b8", "streamingllm_b8", "tova_b8"}))
        << "round " << round;
  }
  EXPECT_EQ(work_.entries(), std::vector<std::string>{"t.h5"});
}

// The rename replaces the trace's inode: an append that waited for the lock of the old file
// takes the lock again on the new one and adds its run to it, keeping the other update's.
TEST_F(CliSimulate, AppendThatWaitedAddsToTheFileRenamedOverTheTrace) {
  const std::string t = fresh_trace(), other = work_.file("other.h5");
  write_bytes(other, read_bytes(t));
  ASSERT_EQ(run_kvscope({"simulate", other, "--policy", "tova", "--budget", "8"}).code, 0);
  const int fd = ::open(t.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // held as another kvscope updating the trace holds it
  CliResult r;
  std::thread waiter([&] { r = run_kvscope({"simulate", t, "--policy", "h2o", "--budget", "8"}); });
  EXPECT_TRUE(test::wait_for_flock_waiter(t, 120.0)) << "simulate never waited for the lock";
  EXPECT_EQ(std::rename(other.c_str(), t.c_str()), 0);  // the other update's result replaces the trace
  ::close(fd);
  waiter.join();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(sorted_runs(t), (std::vector<std::string>{"h2o_b8", "tova_b8"}));
  EXPECT_EQ(work_.entries(), std::vector<std::string>{"t.h5"});
}

// Through a symbolic link the runs go to the trace it leads to, the link stays a link, and the
// new file keeps the trace's permission bits and owner (it used to become a 0644 regular file
// in the link's place, the real trace getting nothing).
TEST_F(CliSimulate, AppendThroughASymlinkKeepsTheLinkTheModeAndTheOwner) {
  fs::create_directory(work_.file("store"));
  const std::string real = work_.file("store/real.h5"), link = work_.file("link.h5");
  write_bytes(real, read_bytes(dir_->file("base.h5")));
  ASSERT_EQ(::chmod(real.c_str(), 0600), 0);
  const bool may_chown = ::chown(real.c_str(), 1234, 5678) == 0;  // as root: an owner to keep
  fs::create_symlink("store/real.h5", link);
  const CliResult r = run_kvscope({"simulate", link, "--policy", "h2o", "--budget", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(sorted_runs(real), std::vector<std::string>{"h2o_b8"});
  struct stat st;
  ASSERT_EQ(::stat(real.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (may_chown) {
    EXPECT_EQ(st.st_uid, 1234u);
    EXPECT_EQ(st.st_gid, 5678u);
  }
  EXPECT_EQ(work_.entries(), (std::vector<std::string>{"link.h5", "store"}));
}

// A trace without its owner's write bit is refused before any work, by every command that
// appends, although root could write it.
TEST_F(CliSimulate, ReadOnlyTraceIsRefusedByEveryAppendingCommand) {
  const std::string t = fresh_trace();
  ASSERT_EQ(::chmod(t.c_str(), 0444), 0);
  const std::string before = read_bytes(t);
  const std::string problem = "is read-only (its owner has no write permission); not changing it";
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", "h2o", "--budget", "8"}), t, problem));
  EXPECT_TRUE(is_input_error(run_kvscope({"rerun", t, "--policy", "h2o", "--budget", "8"}), t, problem));
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", t, "--model", stories_bin()}), t, problem));
  EXPECT_TRUE(read_bytes(t) == before);
  EXPECT_EQ(work_.entries(), std::vector<std::string>{"t.h5"});
}

// --alpha-out into a Hugging Face model folder would replace its config.json: refused (one line,
// exit 2), before any work, the folder intact and still a model; KVScope's own pattern is replaced.
TEST_F(CliSimulate, HeadsAlphaOutReplacesOnlyItsOwnPattern) {
  const std::string t = fresh_trace(), hf = work_.file("hf"), own = work_.file("own");
  fs::copy(shared("stories260K-hf"), hf, fs::copy_options::recursive);
  fs::permissions(hf, fs::perms::owner_all, fs::perm_options::add);  // a user's own copy (../shared's are 555)
  auto snapshot = [&] {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::directory_iterator(hf)) files[e.path().filename()] = read_bytes(e.path());
    return files;
  };
  const auto before = snapshot();
  ASSERT_TRUE(before.count("config.json"));
  const std::string problem = "is not part of a DuoAttention pattern KVScope wrote; not replacing it";
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", t, "--alpha-out", hf}), hf + "/config.json", problem));
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", "--model", stories_bin(), "--alpha-out", hf}), hf + "/config.json",
                             problem));
  EXPECT_TRUE(snapshot() == before);
  EXPECT_EQ(run_kvscope({"info", hf}).code, 0);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(run_kvscope({"heads", t, "--alpha-out", own}).code, 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(own)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "full_attention_heads.tsv"}));
}

// ---- bad input: one line, exit 2, trace byte-identical ----

class CliSimulateBadInput : public CliSimulate {
 protected:
  void SetUp() override {
    trace_ = fresh_trace();
    before_ = read_bytes(trace_);
  }
  void TearDown() override {
    EXPECT_TRUE(read_bytes(trace_) == before_) << "the trace changed";
    EXPECT_EQ(work_.entries(), expected_entries_) << "files left beside the trace";
  }
  CliResult simulate(std::vector<std::string> args) {
    args.insert(args.begin(), {"simulate", trace_});
    return run_kvscope(args);
  }
  std::string trace_, before_;
  std::vector<std::string> expected_entries_{"t.h5"};
};

TEST_F(CliSimulateBadInput, UnknownPolicy) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "nosuch", "--budget", "8"}), "--policy nosuch", "unknown policy"));
}

TEST_F(CliSimulateBadInput, UnknownPolicyAmongGoodOnes) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--policy", "nosuch", "--budget", "8"}), "nosuch",
                             "unknown policy"));
}

TEST_F(CliSimulateBadInput, UnknownParameter) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:foo=1", "--budget", "8"}), "--policy h2o",
                             "unknown parameter 'foo'"));
}

TEST_F(CliSimulateBadInput, BadParameterValue) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "streamingllm:sinks=abc", "--budget", "8"}), "streamingllm", "abc"));
}

TEST_F(CliSimulateBadInput, BudgetZeroAndNegative) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "0"}), "--budget", "0 is outside [1, 1073741824]"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "-3"}), "--budget", "-3 is outside [1, 1073741824]"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:budget=0"}), "--policy h2o:budget=0", "outside [1, 1073741824]"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "x"}), "--budget", "expected an integer"));
}

TEST_F(CliSimulateBadInput, BudgetInsideTheSpecOutOfRange) {
  // 2^32 + 16 would have wrapped to 16 through an int.
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:budget=4294967312", "--budget", "16"}),
                             "--policy h2o:budget=4294967312", "budget 4294967312 is outside [1, 1073741824]"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:budget=0", "--budget", "16"}), "--policy h2o:budget=0",
                             "budget 0 is outside"));
}

TEST_F(CliSimulateBadInput, NegativeH2oSplitAndFlagsGivenTwice) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:heavy=-4", "--budget", "8"}), "--policy h2o",
                             "heavy must be >= 0"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o:recent=-1", "--budget", "8"}), "--policy h2o",
                             "recent must be >= 0"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "8", "--budget", "16"}), "--budget",
                             "given twice ('8', then '16')"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "8", "--threads", "abc"}), "--threads",
                             "expected an integer"));
}

// --budget is needed only by a policy without its own budget=N (full needs none).
TEST_F(CliSimulate, FullAndSpecsWithTheirOwnBudgetNeedNoBudgetFlag) {
  const std::string t = fresh_trace();
  const CliResult r = run_kvscope({"simulate", t, "--policy", "full", "--policy", "h2o:budget=8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TraceReader(t).run_names(), (std::vector<std::string>{"full", "h2o_b8"}));
}

// full keeps every token: its run has no budget whatever --budget says, and a --budget that no
// policy takes (each has its own budget=N, or is full) is refused rather than ignored.
TEST_F(CliSimulate, FullStoresNoBudget) {
  const std::string t = fresh_trace();
  const CliResult r = run_kvscope({"simulate", t, "--policy", "full", "--policy", "h2o", "--budget", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  const TraceReader reader(t);
  EXPECT_EQ(reader.run_names(), (std::vector<std::string>{"full", "h2o_b8"}));
  EXPECT_EQ(reader.read_run("full", false).budget, 0);
  EXPECT_EQ(reader.read_run("h2o_b8", false).budget, 8);
}

TEST_F(CliSimulateBadInput, BudgetThatNoPolicyTakes) {
  for (const std::vector<std::string>& policies :
       {std::vector<std::string>{"--policy", "full"}, {"--policy", "h2o:budget=5"},
        {"--policy", "full", "--policy", "tova:budget=6"}}) {
    std::vector<std::string> args = policies;
    args.insert(args.end(), {"--budget", "8"});
    EXPECT_TRUE(is_input_error(simulate(args), "--budget", "no --policy uses it")) << policies.back();
  }
}

TEST_F(CliSimulateBadInput, MissingBudgetOrPolicy) {
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o"}), "--budget", "is required"));
  EXPECT_TRUE(is_input_error(simulate({"--budget", "8"}), "--policy", "is required"));
  EXPECT_TRUE(is_input_error(simulate({"--policy", "h2o", "--budget", "8", "--nope"}), "--nope", "unknown option"));
}

TEST_F(CliSimulateBadInput, AlphaFolderOfTheWrongShape) {
  const std::string dir = work_.file("alpha");
  fs::create_directory(dir);
  write_bytes(dir + "/full_attention_heads.tsv", "0.5\t0.5\t0.5\t0.5\n0.5\t0.5\t0.5\t0.5\n");
  expected_entries_ = {"alpha", "t.h5"};
  EXPECT_TRUE(is_input_error(simulate({"--policy", "duoattention", "--budget", "8", "--alpha", dir}), dir,
                             "2 layers x 4 KV heads, the model has 5 x 4"));
}

TEST_F(CliSimulateBadInput, AlphaFolderWithANonNumber) {
  const std::string dir = work_.file("alpha");
  fs::create_directory(dir);
  std::string tsv;
  for (int l = 0; l < 5; ++l) tsv += l == 2 ? "0.5\t0.5\tnope\t0.5\n" : "0.5\t0.5\t0.5\t0.5\n";
  write_bytes(dir + "/full_attention_heads.tsv", tsv);
  expected_entries_ = {"alpha", "t.h5"};
  EXPECT_TRUE(is_input_error(simulate({"--policy", "duoattention", "--budget", "8", "--alpha", dir}),
                             "full_attention_heads.tsv", "'nope' is not a number"));
}

TEST_F(CliSimulateBadInput, AlphaFolderMissing) {
  const std::string dir = work_.file("absent");
  EXPECT_TRUE(is_input_error(simulate({"--policy", "duoattention", "--budget", "8", "--alpha", dir}), dir,
                             "not a DuoAttention pattern folder"));
}

TEST_F(CliSimulateBadInput, LayersAndHeadsFlags) {
  EXPECT_TRUE(is_input_error(run_kvscope({"layers", trace_, "--filters", "9"}), "--filters", "9 is outside [1, 5]"));
  EXPECT_TRUE(is_input_error(run_kvscope({"layers", trace_, "--given", "2,9"}), "--given", "layer 9"));
  write_bytes(work_.file("afile"), "x");
  expected_entries_ = {"afile", "t.h5"};
  const std::string out = work_.file("afile") + "/alpha";
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", trace_, "--alpha-out", out}), out, "cannot create"));
}

// A trace whose model file is gone: kvzip needs the model for its repeat-pass scores.
TEST(CliSimulateMissingData, KvzipWithoutTheModel) {
  TempDir models, work;
  const std::string model = models.file("stories260K.bin");
  write_bytes(model, read_bytes(stories_bin()));
  write_bytes(models.file("tok512.bin"), read_bytes(tok512()));
  const std::string t = work.file("t.h5");
  const CliResult rec = record_stories(t, "Once upon a time", 4, model);
  ASSERT_EQ(rec.code, 0) << rec.err;
  fs::remove(model);
  const std::string before = read_bytes(t);
  const CliResult r = run_kvscope({"simulate", t, "--policy", "kvzip", "--budget", "3"});
  EXPECT_TRUE(is_input_error(r, "--policy kvzip", "needs the model"));
  EXPECT_NE(r.err.find(model), std::string::npos) << r.err;
  EXPECT_TRUE(read_bytes(t) == before);
  EXPECT_EQ(work.entries(), std::vector<std::string>{"t.h5"});
  // With --model it works again.
  const CliResult ok = run_kvscope({"simulate", t, "--policy", "kvzip", "--budget", "3", "--model", stories_bin()});
  EXPECT_EQ(ok.code, 0) << ok.err;
}

// KVzip's scores come from the --model given: one of another shape is refused by name before any
// work, and the trace stays as it was.
TEST(CliSimulateMissingData, KvzipWithAModelOfAnotherShape) {
  TempDir work;
  const std::string t = work.file("t.h5");
  ASSERT_EQ(record_stories(t, "Once upon a time", 4).code, 0);
  const std::string before = read_bytes(t);
  const CliResult r =
      run_kvscope({"simulate", t, "--policy", "kvzip", "--budget", "3", "--model", tiny_random_gguf()});
  EXPECT_TRUE(is_input_error(r, tiny_random_gguf(), "model shape differs from the trace's"));
  EXPECT_TRUE(read_bytes(t) == before);
  EXPECT_EQ(work.entries(), std::vector<std::string>{"t.h5"});
}

// Only KVzip's scoring runs a model: --model or --tokenizer beside policies that read the trace
// alone would be ignored, whatever model they name (another shape included), so they are refused.
TEST(CliSimulateMissingData, ModelFlagsNoPolicyUses) {
  TempDir work;
  const std::string t = work.file("t.h5");
  ASSERT_EQ(record_stories(t, "Once upon a time", 4).code, 0);
  const std::string before = read_bytes(t);
  EXPECT_TRUE(is_input_error(
      run_kvscope({"simulate", t, "--policy", "h2o", "--budget", "3", "--model", tiny_random_gguf()}), "--model",
      "is not used: simulate runs the model only for --policy kvzip"));
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", t, "--policy", "full", "--tokenizer", tok512()}),
                             "--tokenizer", "is not used"));
  EXPECT_TRUE(read_bytes(t) == before);
}

TEST(CliSimulateNotATrace, TextFileAndTruncatedTrace) {
  TempDir work;
  const std::string text = work.file("notes.h5");
  write_bytes(text, "not a trace\n");
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", text, "--policy", "full", "--budget", "4"}), text,
                             "not an HDF5 file"));
  EXPECT_EQ(read_bytes(text), "not a trace\n");
  const std::string t = work.file("t.h5");
  ASSERT_EQ(record_stories(t, "Once upon a time", 4).code, 0);
  const std::string full = read_bytes(t);
  const std::string cut = work.file("cut.h5");
  write_bytes(cut, full.substr(0, full.size() / 2));
  EXPECT_TRUE(is_input_error(run_kvscope({"simulate", cut, "--policy", "full", "--budget", "4"}), cut, "truncated"));
  EXPECT_EQ(read_bytes(cut), full.substr(0, full.size() / 2));
  EXPECT_TRUE(is_input_error(run_kvscope({"layers", cut}), cut, "truncated"));
  EXPECT_TRUE(is_input_error(run_kvscope({"heads", cut}), cut, "truncated"));
  EXPECT_EQ(work.entries(), (std::vector<std::string>{"cut.h5", "notes.h5", "t.h5"}));
}

}  // namespace
}  // namespace kvs::cli_test
