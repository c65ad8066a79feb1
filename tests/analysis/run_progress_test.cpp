// Progress and stopping of the policy drivers' engine runs (analysis/run_progress.h): the
// full-cache reference and a live policy run report every prefill layer in order, then the end,
// then every decode step; stopping during the prefill ends the run at the next layer, stopping
// during the decode at the next step, both with RunCancelled; and the engine is left detached,
// giving the same tokens as a fresh one afterwards.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "live_run_fixture.h"

using namespace kvs;
using namespace kvs::test;

namespace {

constexpr int kSteps = 6;

struct Seen {
  std::vector<std::pair<int, int>> layers;  // (layer, n_layers) reported
  std::vector<std::pair<int, int>> steps;   // (step, total) reported
};

RunProgress watching(Seen& seen) {
  RunProgress p;
  p.on_prefill_layer = [&seen](int layer, int n) {
    EXPECT_TRUE(seen.steps.empty()) << "prefill progress after a decode step";
    seen.layers.emplace_back(layer, n);
  };
  p.on_step = [&seen](int step, int total) { seen.steps.emplace_back(step, total); };
  return p;
}

std::vector<std::pair<int, int>> every_layer_then_end(int n_layers) {
  std::vector<std::pair<int, int>> want;
  for (int l = 0; l <= n_layers; ++l) want.emplace_back(l, n_layers);
  return want;
}

std::vector<std::pair<int, int>> every_step(int total) {
  std::vector<std::pair<int, int>> want;
  for (int s = 0; s < total; ++s) want.emplace_back(s, total);
  return want;
}

class RunProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
    prompt_ = st_->tok->encode("Once upon a time, there was a little girl", true);
  }
  const Stories* st_ = nullptr;
  std::vector<int> prompt_;
};

TEST_F(RunProgressTest, ReferenceReportsEveryLayerThenEveryStep) {
  Engine engine(st_->model, single_thread());
  Seen seen;
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {}, watching(seen));
  EXPECT_EQ(seen.layers, every_layer_then_end(st_->model.config.n_layers));
  EXPECT_EQ(seen.steps, every_step(kSteps));
  EXPECT_EQ(ref.tokens.size(), static_cast<size_t>(kSteps));
}

TEST_F(RunProgressTest, LiveRunReportsEveryLayerThenEveryStep) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  auto policy = make_policy(parse_policy_spec("streamingllm", 8), shape_of(st_->model));
  Seen seen;
  LiveRunOptions o;
  o.progress = watching(seen);
  live_run(engine, *policy, PolicyContext{}, ref, *st_->tok, o);
  EXPECT_EQ(seen.layers, every_layer_then_end(st_->model.config.n_layers));
  EXPECT_EQ(seen.steps, every_step(kSteps));
}

TEST_F(RunProgressTest, StoppingInThePrefillEndsAtTheNextLayerAndLeavesTheEngineUsable) {
  Engine engine(st_->model, single_thread());
  Seen seen;
  bool stop = false;
  RunProgress p = watching(seen);
  p.on_prefill_layer = [&](int layer, int n) {
    seen.layers.emplace_back(layer, n);
    stop = layer == 1;  // the user stops while layer 1 runs
  };
  p.cancelled = [&] { return stop; };
  EXPECT_THROW(run_reference(engine, prompt_, kSteps, {}, {}, p), RunCancelled);
  EXPECT_EQ(seen.layers, (std::vector<std::pair<int, int>>{{0, st_->model.config.n_layers}, {1, st_->model.config.n_layers}}));
  EXPECT_TRUE(seen.steps.empty());

  // The stopped run left no observer behind: the engine runs on as a fresh one does.
  const ReferenceRun again = run_reference(engine, prompt_, kSteps, {}, {});
  Engine fresh(st_->model, single_thread());
  EXPECT_EQ(again.tokens, run_reference(fresh, prompt_, kSteps, {}, {}).tokens);
}

TEST_F(RunProgressTest, StoppingInTheDecodeEndsAtTheNextStep) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  auto policy = make_policy(parse_policy_spec("h2o", 8), shape_of(st_->model));
  for (const bool reference : {true, false}) {
    SCOPED_TRACE(reference ? "reference" : "live run");
    Seen seen;
    RunProgress p = watching(seen);
    p.cancelled = [&] { return seen.steps.size() == 2; };  // stopped after the second step
    if (reference) {
      EXPECT_THROW(run_reference(engine, prompt_, kSteps, {}, {}, p), RunCancelled);
    } else {
      LiveRunOptions o;
      o.progress = p;
      EXPECT_THROW(live_run(engine, *policy, PolicyContext{}, ref, *st_->tok, o), RunCancelled);
    }
    EXPECT_EQ(seen.steps, (std::vector<std::pair<int, int>>{{0, kSteps}, {1, kSteps}}));
  }
}

}  // namespace
