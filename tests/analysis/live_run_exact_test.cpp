// Live runs whose budget covers the whole context: every policy, enforced inside the engine,
// reproduces the full-cache logits bit for bit (forced mode) and the full-cache text (free mode).
#include <gtest/gtest.h>

#include <cstring>

#include "live_run_fixture.h"

using namespace kvs;
using namespace kvs::test;

namespace {

constexpr int kSteps = 24;

class LiveExact : public ::testing::Test {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
    prompt_ = st_->tok->encode("Once upon a time, there was a little girl named Lily.", true);
  }
  const Stories* st_ = nullptr;
  std::vector<int> prompt_;
};

TEST_F(LiveExact, EveryPolicyWithAWholeContextBudgetReproducesTheFullCacheLogitsBitwise) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const int P = static_cast<int>(prompt_.size()), T = P + kSteps;
  const int vocab = st_->model.config.vocab_size;
  ASSERT_EQ(ref.logits.size(), static_cast<size_t>(kSteps) * vocab);
  const ModelShape shape = shape_of(st_->model);

  // Budget T: nothing is ever evicted; OmniKV's k = min(T, P) = P selects every prompt key, so
  // its sparse layers skip nothing either.
  auto cases = all_policies(*st_, prompt_, T);
  ASSERT_EQ(cases.size(), 12u);
  for (PolicyCase& c : cases) {
    SCOPED_TRACE(c.name);
    LogitsTap tap(P);
    LiveRunOptions o;
    o.mode = "forced";
    o.key_scores = c.key_scores;
    o.observer = &tap;
    const RunData run = live_run(engine, *c.policy, c.context, ref, *st_->tok, o);
    EXPECT_EQ(run.eviction, "real");
    ASSERT_EQ(tap.logits.size(), ref.logits.size());
    EXPECT_EQ(std::memcmp(tap.logits.data(), ref.logits.data(), ref.logits.size() * sizeof(float)), 0)
        << "logits differ from the full cache";
    for (float v : metric(run, "kl").data) EXPECT_EQ(v, 0.0f);
    for (float v : metric(run, "top1_agree").data) EXPECT_EQ(v, 1.0f);
    EXPECT_EQ(scalar(run, "first_divergence"), -1.0);
    EXPECT_EQ(scalar(run, "peak_kv_bytes"), static_cast<double>(ref.peak_kv_bytes));
    // Every position up to the query is held and attended at every step.
    ASSERT_EQ(run.kept.size(), static_cast<size_t>(kSteps) * shape.n_layers * shape.n_kv_heads * T);
    for (int s = 0; s < kSteps; ++s)
      for (int lg = 0; lg < shape.n_layers * shape.n_kv_heads; ++lg)
        for (int t = 0; t < T; ++t)
          ASSERT_EQ(run.kept[(static_cast<size_t>(s) * shape.n_layers * shape.n_kv_heads + lg) * T + t],
                    t <= P + s ? 1 : 0)
              << "step " << s << " pos " << t;
  }
}

TEST_F(LiveExact, EveryPolicyWithAWholeContextBudgetGeneratesTheFullCacheTextInFreeMode) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const int T = static_cast<int>(prompt_.size()) + kSteps;
  for (PolicyCase& c : all_policies(*st_, prompt_, T)) {
    SCOPED_TRACE(c.name);
    LiveRunOptions o;
    o.mode = "free";
    o.key_scores = c.key_scores;
    o.keep_attention = false;
    const RunData run = live_run(engine, *c.policy, c.context, ref, *st_->tok, o);
    const std::vector<int32_t> own(run.tokens.begin() + prompt_.size(), run.tokens.end());
    EXPECT_EQ(own, std::vector<int32_t>(ref.tokens.begin(), ref.tokens.end()));
    EXPECT_EQ(scalar(run, "first_divergence"), -1.0);
    EXPECT_EQ(scalar(run, "compared_steps"), kSteps);  // the same text: every step compares
    for (float v : metric(run, "kl").data) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
