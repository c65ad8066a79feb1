// Live runs started from the reference run's prefill (run_reference with a share window: the
// engine's state after the prompt, and the prompt's evidence for policies) give every policy the
// run, bit for bit, it has when it prefills the prompt itself — forced and free, evicting — and
// leave the shared evidence as they found it; a run whose observer did not watch that prefill, or
// that asks for another window, prefills itself. KVzip's scoring starts from it too.
#include <gtest/gtest.h>

#include "live_run_fixture.h"
#include "run_equal.h"

using namespace kvs;
using namespace kvs::test;

namespace {

constexpr int kSteps = 12, kBudget = 10;

class SharedPrefillRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
    prompt_ = st_->tok->encode("Once upon a time, there was a little girl named Lily. She loved to play.", true);
  }
  const Stories* st_ = nullptr;
  std::vector<int> prompt_;
};

TEST_F(SharedPrefillRuns, EveryPolicyGetsTheRunItsOwnPrefillGivesBitwise) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun own = run_reference(engine, prompt_, kSteps, {}, {});
  EXPECT_FALSE(own.prefill);
  const ReferenceRun shared = run_reference(engine, prompt_, kSteps, {}, {}, {}, LiveRunOptions{}.window_request);
  ASSERT_TRUE(shared.prefill);
  ASSERT_TRUE(shared.prefill->snapshot);
  EXPECT_EQ(shared.prefill->window, LiveRunOptions{}.window_request);
  EXPECT_EQ(shared.prefill->evidence.prompt_len, static_cast<int>(prompt_.size()));
  EXPECT_EQ(shared.tokens, own.tokens);
  EXPECT_EQ(shared.logits, own.logits);

  for (const std::string mode : {"forced", "free"}) {
    auto alone = all_policies(*st_, prompt_, kBudget), from_shared = all_policies(*st_, prompt_, kBudget);
    ASSERT_EQ(alone.size(), 12u);
    for (std::size_t i = 0; i < alone.size(); ++i) {
      SCOPED_TRACE(alone[i].name + ", " + mode);
      LiveRunOptions o;
      o.mode = mode;
      o.key_scores = alone[i].key_scores;
      const RunData want = live_run(engine, *alone[i].policy, alone[i].context, own, *st_->tok, o);
      const RunData got = live_run(engine, *from_shared[i].policy, from_shared[i].context, shared, *st_->tok, o);
      kvs::testing::expect_same_run(got, want, true);
      const bool evicts = alone[i].name != "full" && alone[i].name != "omnikv";  // those two evict nothing
      EXPECT_EQ(scalar(got, "mean_kv_ratio") < 1.0, evicts);
      EXPECT_TRUE(shared.prefill->evidence.key_scores.empty())
          << "a run's KVzip scores stayed in the shared evidence";
    }
  }
}

// KVzip's scoring pass on the reference's engine, from its prefill, scores what a pass of its own
// scores, bit for bit.
TEST_F(SharedPrefillRuns, KvzipScoringFromTheSharedPrefillEqualsItsOwn) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun shared = run_reference(engine, prompt_, kSteps, {}, {}, {}, LiveRunOptions{}.window_request);
  ASSERT_TRUE(shared.prefill && shared.prefill->snapshot);
  KvzipOptions own;
  own.engine = single_thread();
  own.chunk = 7;  // several repeat passes, each rewinding to the prompt
  KvzipOptions restored = own;
  restored.on = &engine;
  restored.from = shared.prefill->snapshot.get();
  int layers = 0;
  restored.progress.on_prefill_layer = [&](int layer, int n) { layers += layer < n; };
  const std::vector<float> want = kvzip_key_scores(st_->model, *st_->tok, prompt_, own);
  EXPECT_EQ(kvzip_key_scores(st_->model, *st_->tok, prompt_, restored), want);
  EXPECT_EQ(layers, 0) << "the prompt was processed again";
  ASSERT_FALSE(want.empty());
}

// Which runs start from the shared prefill: not one whose observer did not watch it (it would miss
// the prompt), nor one that wants another window; those prefill the prompt themselves (layer by
// layer). An observer that watched the shared prefill (record --policy's recorder) sees the prompt
// once, from it, and the run's decode after, whether the run starts from the prefill or not.
TEST_F(SharedPrefillRuns, ARunStartsFromTheSharedPrefillOnlyWhereItsObserverSawIt) {
  class Tokens : public AttentionObserver {
   public:
    void on_token(int pos, int) override { (pos < prompt_len ? prompt : decoded) += 1; }
    int prompt_len = 0, prompt = 0, decoded = 0;
  };
  const int P = static_cast<int>(prompt_.size()), L = st_->model.config.n_layers;
  for (const bool watched : {false, true})
    for (const bool other_window : {false, true}) {
      SCOPED_TRACE(std::string(watched ? "watched" : "not watched") + (other_window ? ", another window" : ""));
      Engine engine(st_->model, single_thread());
      Tokens observer;
      observer.prompt_len = P;
      const ReferenceRun shared = run_reference(engine, prompt_, kSteps, {}, {}, {}, LiveRunOptions{}.window_request,
                                                watched ? &observer : nullptr);
      ASSERT_TRUE(shared.prefill);
      EXPECT_EQ(observer.prompt, watched ? P : 0);
      EXPECT_EQ(observer.decoded, 0) << "the observer saw the reference's decode";
      const auto policy = make_policy(parse_policy_spec("snapkv", kBudget), shape_of(st_->model));
      LiveRunOptions o;
      o.mode = "forced";
      o.observer = &observer;
      if (other_window) o.window_request = 8;
      int layers = 0;
      o.progress.on_prefill_layer = [&](int layer, int n) { layers += layer < n; };
      live_run(engine, *policy, {}, shared, *st_->tok, o);
      EXPECT_EQ(layers, watched && !other_window ? 0 : L) << "prefilled or not";
      EXPECT_EQ(observer.prompt, P);
      EXPECT_EQ(observer.decoded, kSteps);
    }
}

}  // namespace
