// Simulator semantics shared by every policy: what a policy sees (renormalized rows with raw
// logits preserved), attend-then-evict budgets, full coverage, one pass for many policies,
// and errors before any work.
#include <gtest/gtest.h>

#include <cmath>

#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

namespace {

// Records what the driver hands a policy; evicts like a window of 3.
class SpyPolicy : public Policy {
 public:
  SpyPolicy() : Policy(PolicySpec{"spy", {}, 3}) {}
  std::string params_json() const override { return "{}"; }
  void begin(const PolicyContext& ctx) override { prompt_len = ctx.prompt_len; }
  void after_prefill(int P, KvSlots& kv) override { trim(kv, 0); }
  void before_attention(int layer, int q, KvSlots& kv) override {
    auto held = kv.held(layer, 0);
    before_last_held = held.empty() ? -1 : held.back();
  }
  void after_attention(int layer, int q, std::span<const AttentionBlock> heads, KvSlots& kv) override {
    for (const AttentionBlock& b : heads) {
      float s = 0.0f;
      for (int j = 0; j < b.n_keys; ++j) s += b.probs[j];
      max_sum_err = std::max(max_sum_err, std::fabs(s - 1.0f));
      seen.push_back({b.layer, b.head, q, b.n_keys, b.key(0), b.probs[0], b.lse[0]});
    }
    trim(kv, layer);
  }
  struct Seen {
    int layer, head, q, n_keys, key0;
    float p0, lse;
  };
  std::vector<Seen> seen;
  float max_sum_err = 0.0f;
  int prompt_len = 0, before_last_held = -1;

 private:
  void trim(KvSlots& kv, int only_layer) {
    for (int l = 0; l < kv.n_layers(); ++l)
      for (int g = 0; g < kv.n_kv_heads(); ++g) {
        const int n = (int)kv.held(l, g).size();
        if (n <= 3) continue;
        std::vector<uint8_t> keep(n, 0);
        for (int i = n - 3; i < n; ++i) keep[i] = 1;
        kv.evict(l, g, keep);
      }
  }
};

}  // namespace

TEST(Simulator, PoliciesSeeRenormalizedRowsThatKeepRawLogits) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 8, 3, 4, 71);
  SpyPolicy spy;
  const RunData r = run_one(in, spy);
  EXPECT_EQ(spy.prompt_len, 8);
  EXPECT_LT(spy.max_sum_err, 1e-5f);
  ASSERT_EQ(spy.seen.size(), 3u * 2 * 4);
  for (const auto& s : spy.seen) {
    EXPECT_EQ(s.n_keys, 4);  // B = 3 carried + the query itself
    EXPECT_EQ(s.key0, s.q - 3);
    const int step = s.q - 8;
    const size_t r0 = (((size_t)step * 2 + s.layer) * 4 + s.head);
    const float raw = std::log(in.rows[r0 * in.total_len + s.key0]) + in.lse[r0];
    EXPECT_NEAR(std::log(s.p0) + s.lse, raw, 1e-4);
  }
  EXPECT_EQ(spy.before_last_held, 10);  // the query was appended before before_attention
}

TEST(Simulator, EveryPolicyKeepsEverythingWhenTheBudgetCoversTheContext) {
  const ModelShape shape = shape_of(3, 4, 2);
  const SimInput in = random_input(shape, 12, 6, 4, 72);
  for (const std::string& name : policy_names()) {
    auto p = policy(name == "omnikv" ? "omnikv:filters=1" : name, 18, shape);
    const RunData r = run_one(in, *p);
    for (float v : metric(r, "recall")->data) ASSERT_NEAR(v, 1.0f, 1e-5) << name;
    for (float v : metric(r, "topk_miss")->data) ASSERT_EQ(v, 0.0f) << name;
    for (int s = 0; s < 6; ++s) EXPECT_EQ(kept_at(r, in, s, 2, 1), range(0, 13 + s)) << name;
  }
}

TEST(Simulator, EveryStepPoliciesAttendAtMostBPlusOne) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 40, 12, 8, 73);
  for (const char* name : {"window", "streamingllm", "strided", "h2o", "tova", "duoattention"}) {
    auto p = policy(name, 10, shape);
    const RunData r = run_one(in, *p);
    for (int s = 0; s < 12; ++s)
      for (int l = 0; l < 2; ++l)
        for (int g = 0; g < 2; ++g) {
          const size_t n = kept_at(r, in, s, l, g).size();
          if (std::string(name) == "duoattention") EXPECT_TRUE(n == 11u || n == 41u + s) << name;
          else EXPECT_EQ(n, 11u) << name;
        }
  }
}

TEST(Simulator, OneTokenPromptWorksForEveryPolicy) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 1, 5, 4, 74);
  for (const std::string& name : policy_names()) {
    auto p = policy(name == "omnikv" ? "omnikv:filters=0" : name, 2, shape);
    const RunData r = run_one(in, *p);
    EXPECT_EQ(kept_at(r, in, 0, 0, 0), (std::vector<int>{0, 1})) << name;
    EXPECT_LE(kept_at(r, in, 4, 1, 1).size(), 6u) << name;
  }
}

TEST(Simulator, ManyPoliciesInOnePassEqualSeparateRuns) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 30, 8, 8, 75);
  std::vector<std::unique_ptr<Policy>> owned;
  std::vector<Policy*> ptrs;
  for (const char* name : {"h2o", "tova", "snapkv", "omnikv:filters=0"}) {
    owned.push_back(policy(name, 8, shape));
    ptrs.push_back(owned.back().get());
  }
  const std::vector<RunData> together = simulate(in, ptrs, {});
  ASSERT_EQ(together.size(), 4u);
  int i = 0;
  for (const char* name : {"h2o", "tova", "snapkv", "omnikv:filters=0"}) {
    auto p = policy(name, 8, shape);
    const RunData alone = run_one(in, *p);
    EXPECT_EQ(alone.kept, together[i].kept) << name;
    EXPECT_EQ(alone.metrics[0].data, together[i].metrics[0].data) << name;
    EXPECT_EQ(alone.name, together[i].name);
    ++i;
  }
}

// A 5.7 GB SmolLM2 trace (1,500 steps of 3,420 keys) replayed in 22 s to 45 s with nothing on the
// terminal: the simulator now reports each step once every policy has replayed it.
TEST(Simulator, ReportsEachStepReplayed) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 10, 6, 4, 79);
  auto h2o = policy("h2o", 4, shape), tova = policy("tova", 4, shape);
  std::vector<Policy*> ptrs{h2o.get(), tova.get()};
  std::vector<std::pair<int, int>> reports;
  SimulateOptions opt;
  opt.on_step = [&reports](int step, int total) { reports.emplace_back(step, total); };
  simulate(in, ptrs, opt);
  ASSERT_EQ(reports.size(), 6u);
  for (int s = 0; s < 6; ++s) EXPECT_EQ(reports[s], std::make_pair(s, 6));
}

TEST(Simulator, MissingEvidenceIsAnInputErrorBeforeAnyWork) {
  const ModelShape shape = shape_of(2, 4, 2);
  SimInput in = random_input(shape, 20, 2, 4, 76);
  in.prefill.window_rows.clear();
  in.prefill.window = 0;
  for (const char* name : {"snapkv", "pyramidkv", "adakv", "tova"}) {
    auto p = policy(name, 8, shape);
    EXPECT_THROW(run_one(in, *p), InputError) << name;
  }
  in.prefill.colsum.clear();
  auto h = policy("h2o", 8, shape);
  EXPECT_THROW(run_one(in, *h), InputError);
  SimInput bad = random_input(shape, 5, 2, 4, 77);
  bad.q_pos = {6, 6};
  auto w = policy("window", 4, shape);
  EXPECT_THROW(run_one(bad, *w), InputError);
}

TEST(Simulator, RunAttributes) {
  const ModelShape shape = shape_of(1, 2, 1);
  const SimInput in = random_input(shape, 6, 2, 2, 78);
  auto p = policy("h2o:heavy=2", 4, shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(r.name, "h2o_heavy2_b4");
  EXPECT_EQ(r.policy, "h2o");
  EXPECT_EQ(r.budget, 4);
  EXPECT_EQ(r.eviction, "simulated");
  EXPECT_EQ(r.params_json, "{\"heavy\":2,\"recent\":2,\"gqa\":\"mean\"}");
  EXPECT_EQ(r.kept.size(), 2u * 1 * 1 * 8);
  std::vector<std::string> names;
  for (const auto& m : r.metrics) {
    names.push_back(m.name);
    EXPECT_EQ(m.dims, (std::vector<uint64_t>{2, 1, 1}));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"recall", "topk_miss", "kept", "evicted", "inactive", "kv_bytes",
                                              "paged_bytes_freed", "hh_turnover"}));
}

// A run that carries its own kept sets (a live run) gets the simulator's metrics from them: the
// same values the simulator measured for those sets, without hh_turnover; from compare_until on,
// recall and top-k miss are NaN and the counts stay.
TEST(KeptSetMetrics, EqualTheSimulatorsForTheSameKeptSets) {
  const ModelShape shape = shape_of(2, 4, 2);
  const SimInput in = random_input(shape, 12, 6, 4, 91);
  auto p = policy("h2o", 6, shape);
  const RunData sim = run_one(in, *p);
  RunData live = sim;
  live.metrics = {{"kl", {6}, std::vector<float>(6, 0.5f)}, {"kv_bytes", {6}, std::vector<float>(6, 1.0f)}};
  live.scalars.clear();
  std::vector<RunData> runs{live, live};
  const int until[] = {6, 4};
  add_kept_set_metrics(in, runs, until, 16);
  for (const char* name : {"recall", "topk_miss", "kept", "evicted", "inactive", "kv_bytes", "paged_bytes_freed"}) {
    ASSERT_NE(metric(runs[0], name), nullptr) << name;
    EXPECT_EQ(metric(runs[0], name)->data, metric(sim, name)->data) << name;
  }
  EXPECT_EQ(metric(runs[0], "hh_turnover"), nullptr);
  EXPECT_EQ(metric(runs[0], "kl")->data, std::vector<float>(6, 0.5f)) << "its own metrics stay";
  EXPECT_EQ(runs[0].metrics.size(), 8u) << "kv_bytes replaced, not doubled";
  EXPECT_EQ(runs[0].scalars, (std::vector<std::pair<std::string, double>>{{"block_size", 16.0}}));
  const size_t per_step = (size_t)shape.n_layers * shape.n_kv_heads;
  const std::vector<float>& recall = metric(runs[1], "recall")->data;
  for (size_t i = 0; i < recall.size(); ++i) {
    if (i / per_step >= 4) EXPECT_TRUE(std::isnan(recall[i])) << i;
    else EXPECT_EQ(recall[i], metric(sim, "recall")->data[i]) << i;
  }
  EXPECT_EQ(metric(runs[1], "kept")->data, metric(sim, "kept")->data);
}
