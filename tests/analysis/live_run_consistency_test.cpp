// Consistency of the two policy drivers: a live run of each policy is recorded with a
// TraceRecorder (its own attention and prefill), the simulator replays that trace through a fresh
// instance of the same policy, and the kept sets of both drivers must be identical, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "analysis/recorder.h"
#include "analysis/simulator.h"
#include "live_run_fixture.h"

using namespace kvs;
using namespace kvs::test;
namespace fs = std::filesystem;

namespace {

constexpr int kBudget = 12;
constexpr const char* kLongPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
    "One day, she saw a big red ball in the park and ran to get it.";

class DriverConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
  }

  // Checks every policy on `text` + `steps` steps in `mode`. Each policy must have evicted or
  // skipped something (a kept set differing from the full cache), except those in `lossless`.
  void check_all(const std::string& text, int steps, const std::set<std::string>& lossless,
                 const std::string& mode = "forced") {
    const std::vector<int> prompt = st_->tok->encode(text, true);
    const int P = static_cast<int>(prompt.size()), T = P + steps;
    const ModelShape shape = shape_of(st_->model);
    Engine engine(st_->model, single_thread());
    const ReferenceRun ref = run_reference(engine, prompt, steps, {}, {});
    for (PolicyCase& c : all_policies(*st_, prompt, kBudget)) {
      SCOPED_TRACE(c.name + " on a " + std::to_string(P) + "-token prompt");
      const std::string path =
          (fs::temp_directory_path() / ("kvs_live_consistency_" + std::to_string(::getpid()) + "_" + c.name + ".h5")).string();
      TraceMeta meta;
      meta.model = st_->model.config.name;
      meta.shape = shape;
      meta.vocab_size = st_->model.config.vocab_size;
      meta.prompt_len = P;
      TraceRecorder rec(path, meta, steps);
      LiveRunOptions o;
      o.mode = mode;
      o.key_scores = c.key_scores;
      o.observer = &rec;
      const RunData live = live_run(engine, *c.policy, c.context, ref, *st_->tok, o);
      rec.finish([&](int id) { return st_->tok->token_text(id); });

      TraceReader trace(path);
      EXPECT_EQ(trace.meta().n_steps, steps);
      EXPECT_EQ(trace.token_ids(), live.tokens);  // the trace is this run's own sequence
      // The run's stored attention is the trace's decode rows, the simulator's input.
      std::vector<float> rows, lse;  // [L, H, T], [L, H]
      const size_t per_step = static_cast<size_t>(shape.n_layers) * shape.n_heads;
      for (int s = 0; s < steps; ++s) {
        trace.read_decode_step(s, rows, lse);
        ASSERT_TRUE(std::equal(rows.begin(), rows.end(), live.attention.begin() + s * per_step * T)) << "step " << s;
        ASSERT_TRUE(std::equal(lse.begin(), lse.end(), live.lse.begin() + s * per_step)) << "step " << s;
      }
      auto fresh = make_policy(c.policy->spec(), shape);
      SimulateOptions so;
      so.metrics = false;
      so.alpha = c.context.alpha;
      so.alpha_source = c.context.alpha_source;
      so.key_scores = c.key_scores;
      const RunData sim = simulate(trace, *fresh, so);
      fs::remove(path);

      ASSERT_EQ(live.kept.size(), static_cast<size_t>(steps) * shape.n_layers * shape.n_kv_heads * T);
      ASSERT_EQ(sim.kept.size(), live.kept.size());
      size_t first_diff = live.kept.size();
      for (size_t i = 0; i < live.kept.size() && first_diff == live.kept.size(); ++i)
        if (live.kept[i] != sim.kept[i]) first_diff = i;
      if (first_diff != live.kept.size()) {
        const size_t lg = first_diff / T, g = lg % shape.n_kv_heads, l = (lg / shape.n_kv_heads) % shape.n_layers;
        ADD_FAILURE() << "kept sets differ first at step " << lg / (shape.n_layers * shape.n_kv_heads) << " layer " << l
                      << " KV head " << g << " pos " << first_diff % T << ": live "
                      << int(live.kept[first_diff]) << ", simulated " << int(sim.kept[first_diff]);
      }
      // The same resolved parameters on both sides (gates, layer budgets, k, ...).
      EXPECT_EQ(live.params_json, sim.params_json);
      bool lossy = false;
      for (int s = 0; s < steps && !lossy; ++s)
        for (int lg = 0; lg < shape.n_layers * shape.n_kv_heads && !lossy; ++lg)
          for (int t = 0; t <= P + s; ++t)
            if (live.kept[(static_cast<size_t>(s) * shape.n_layers * shape.n_kv_heads + lg) * T + t] != 1) lossy = true;
      EXPECT_EQ(lossy, !lossless.count(c.name)) << "budget " << kBudget << ", prompt " << P;
    }
  }

  const Stories* st_ = nullptr;
};

TEST_F(DriverConsistency, ShortPromptLongDecodeKeptSetsMatchTheSimulator) {
  // Every-step policies evict during decode. The prompt fits the budget, so the prefill-once
  // policies keep it whole and OmniKV's k = min(B, P) selects all of it.
  check_all("Once upon a time", 40, {"full", "snapkv", "pyramidkv", "adakv", "kvzip", "omnikv"});
}

TEST_F(DriverConsistency, LongPromptKeptSetsMatchTheSimulator) {
  // A prompt longer than the budget: the prefill-once policies (SnapKV, PyramidKV, Ada-KV, KVzip)
  // compress it, OmniKV skips prompt keys in its sparse layers.
  check_all(kLongPrompt, 24, {"full"});
}

TEST_F(DriverConsistency, FreeRunKeptSetsMatchTheSimulatorOverTheRunsOwnTokens) {
  // In free mode the run feeds its own tokens; the recorded trace holds them and its own rows.
  check_all(kLongPrompt, 24, {"full"}, "free");
}

}  // namespace
