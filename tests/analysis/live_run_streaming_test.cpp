// StreamingLLM with a tiny window, enforced live on stories260K: the output changes, KL is 0
// exactly until the first step whose attention misses an evicted key and > 0 from then on, and
// the peak KV bytes follow the engine's attend-then-evict arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "live_run_fixture.h"

using namespace kvs;
using namespace kvs::test;

namespace {

constexpr int kBudget = 8;  // 4 sinks + 4 recent
constexpr int kSteps = 40;

class LiveStreaming : public ::testing::Test {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
    prompt_ = st_->tok->encode("Once upon a time", true);
    ASSERT_LE(static_cast<int>(prompt_.size()), kBudget) << "the prompt must fit the window";
  }
  RunData run(Engine& engine, const ReferenceRun& ref, const std::string& mode, AttentionObserver* tap = nullptr) {
    auto p = make_policy(parse_policy_spec("streamingllm", kBudget), shape_of(st_->model));
    LiveRunOptions o;
    o.mode = mode;
    o.observer = tap;
    return live_run(engine, *p, {}, ref, *st_->tok, o);
  }
  const Stories* st_ = nullptr;
  std::vector<int> prompt_;
};

TEST_F(LiveStreaming, KlIsZeroUntilTheWindowIsExceededAndPositiveFromThen) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const RunData r = run(engine, ref, "forced");
  const int P = static_cast<int>(prompt_.size());
  // Each layer trims to B after attending, so the query at q attends q + 1 keys while q <= B;
  // the query at B + 1 is the first whose cache lost a key (position 4, the oldest non-sink).
  const int first_lossy = kBudget + 1 - P;
  const std::vector<float>& kl = metric(r, "kl").data;
  ASSERT_EQ(kl.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) {
    if (s < first_lossy) EXPECT_EQ(kl[s], 0.0f) << "step " << s;
    else EXPECT_GT(kl[s], 0.0f) << "step " << s;
  }
  // The kept set of the first lossy step: sinks 0..3 and the B + 1 - 4 newest positions.
  const ModelShape sh = shape_of(st_->model);
  const int T = P + kSteps, q = P + first_lossy;
  for (int lg = 0; lg < sh.n_layers * sh.n_kv_heads; ++lg)
    for (int t = 0; t < T; ++t) {
      const bool expect = t < 4 || (t > q - (kBudget + 1 - 4) && t <= q);
      ASSERT_EQ(r.kept[(static_cast<size_t>(first_lossy) * sh.n_layers * sh.n_kv_heads + lg) * T + t], expect)
          << "pos " << t;
    }
}

TEST_F(LiveStreaming, PeakKvBytesFollowTheBudgetArithmetic) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const RunData r = run(engine, ref, "forced");
  const ModelConfig& c = st_->model.config;
  const double entry = 2.0 * c.head_dim * sizeof(float);  // K + V of one position, one KV head
  const int P = static_cast<int>(prompt_.size());
  // While layer l attends it holds B + 1 entries per KV head (the new key, before eviction);
  // every other layer holds B.
  EXPECT_EQ(scalar(r, "peak_kv_bytes"), (c.n_layers * c.n_kv_heads * kBudget + c.n_kv_heads) * entry);
  // The full cache peaks at the last step with every position held everywhere.
  EXPECT_EQ(scalar(r, "full_peak_kv_bytes"), static_cast<double>(c.n_layers) * c.n_kv_heads * (P + kSteps) * entry);
  EXPECT_DOUBLE_EQ(scalar(r, "peak_kv_ratio"), (c.n_layers * c.n_kv_heads * kBudget + c.n_kv_heads) /
                                                   static_cast<double>(c.n_layers * c.n_kv_heads * (P + kSteps)));
  // At each attention a KV head holds min(B + 1, positions so far) entries (the new key before
  // eviction), as the simulator counts them.
  const NamedArray& bytes = metric(r, "kv_bytes");
  const uint64_t L = c.n_layers, Hkv = c.n_kv_heads;
  ASSERT_EQ(bytes.dims, (std::vector<uint64_t>{kSteps, L, Hkv}));
  for (int s = 0; s < kSteps; ++s)
    for (size_t lg = 0; lg < L * Hkv; ++lg)
      EXPECT_EQ(bytes.data[s * L * Hkv + lg], std::min(kBudget + 1, P + s + 1) * entry) << "step " << s;
  // After every step all layers are back to min(B, positions so far) entries per KV head; the
  // full cache holds every position.
  double ratio = 0.0;
  for (int s = 0; s < kSteps; ++s) ratio += std::min(kBudget, P + s + 1) / static_cast<double>(P + s + 1);
  EXPECT_NEAR(scalar(r, "mean_kv_ratio"), ratio / kSteps, 1e-12);
}

TEST_F(LiveStreaming, FreeRunTextDiffersFromTheFullCacheRun) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const RunData r = run(engine, ref, "free");
  std::string full_text;
  int prev = prompt_.back();
  for (int t : ref.tokens) {
    full_text += st_->tok->decode_piece(prev, t);
    prev = t;
  }
  EXPECT_NE(r.text, full_text);
  // Token s + 1 is chosen from the logits of step s (after feeding token s), which stay exact
  // while the window holds: first_divergence is the step that chose the first differing token.
  const int P = static_cast<int>(prompt_.size());
  const double first = scalar(r, "first_divergence");
  EXPECT_GE(first, kBudget + 1 - P);
  EXPECT_LT(first, kSteps - 1);
  int differs = 0;  // the first generated token that differs
  while (r.tokens[P + differs] == ref.tokens[differs]) ++differs;
  EXPECT_EQ(first, differs - 1);
  // Greedy, that is the step a forced run names: its logits up to there came after the same tokens.
  EXPECT_EQ(scalar(run(engine, ref, "forced"), "first_divergence"), first);
  // Logits compare while they come after the same tokens (steps 0..first); from the step fed the
  // differing token on, the two predict after different texts: NaN. Perplexity covers the
  // compared steps.
  EXPECT_EQ(scalar(r, "compared_steps"), first + 1);
  for (const char* name : {"kl", "top1_agree", "ref_logprob"}) {
    const std::vector<float>& v = metric(r, name).data;
    ASSERT_EQ(v.size(), static_cast<size_t>(kSteps)) << name;
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(std::isnan(v[s]), s > first) << name << " step " << s;
  }
  double nll = 0.0;
  for (int s = 0; s <= first; ++s) nll -= metric(r, "ref_logprob").data[s];
  EXPECT_NEAR(scalar(r, "perplexity"), std::exp(nll / (first + 1)), 1e-6 * scalar(r, "perplexity"));
  EXPECT_EQ(r.mode, "free");
  EXPECT_EQ(r.eviction, "real");
}

// A run's perplexity alone does not say what eviction cost: full_perplexity is the full cache's
// on the same reference tokens over the same (compared) steps, the number to hold it against.
TEST_F(LiveStreaming, FullPerplexityIsTheFullCachesOverTheRunsComparedSteps) {
  Engine engine(st_->model, single_thread());
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const int vocab = st_->model.config.vocab_size;
  auto full_nll = [&](int steps) {  // -sum of log softmax(reference logits)[reference's next token]
    double nll = 0.0;
    for (int s = 0; s < steps; ++s) {
      const float* l = ref.logits.data() + static_cast<size_t>(s) * vocab;
      double m = l[0], z = 0.0;
      for (int v = 1; v < vocab; ++v) m = std::max(m, (double)l[v]);
      for (int v = 0; v < vocab; ++v) z += std::exp(l[v] - m);
      nll -= l[ref.next[s]] - m - std::log(z);
    }
    return nll;
  };
  for (const std::string mode : {"forced", "free"}) {
    const RunData r = run(engine, ref, mode);
    const int compared = static_cast<int>(scalar(r, "compared_steps"));
    ASSERT_GT(compared, 0) << mode;
    const double expect = std::exp(full_nll(compared) / compared);
    EXPECT_NEAR(scalar(r, "full_perplexity"), expect, 1e-9 * expect) << mode;
    EXPECT_GT(scalar(r, "perplexity"), scalar(r, "full_perplexity")) << mode << ": the evictions cost something";
  }
  // The full policy's run is the full cache: both perplexities are one number.
  auto full = make_policy(parse_policy_spec("full", 0), shape_of(st_->model));
  const RunData f = live_run(engine, *full, {}, ref, *st_->tok, LiveRunOptions{});
  EXPECT_DOUBLE_EQ(scalar(f, "perplexity"), scalar(f, "full_perplexity"));
}

// A free run whose first token already differs from the reference's (a sampled reference,
// re-run greedily) compares no step: its perplexities are NaN, not 0 (a perplexity is >= 1).
TEST_F(LiveStreaming, FreeRunWithNoComparedStepHasNoPerplexity) {
  Engine engine(st_->model, single_thread());
  SamplingOptions hot;
  hot.temperature = 2.0f;
  for (hot.seed = 1; hot.seed <= 64; ++hot.seed) {
    const ReferenceRun ref = run_reference(engine, prompt_, 4, {}, hot);
    const RunData r = run(engine, ref, "free");  // greedy
    if (r.tokens[prompt_.size()] == ref.tokens[0]) continue;
    EXPECT_EQ(scalar(r, "compared_steps"), 0);
    EXPECT_EQ(scalar(r, "first_divergence"), 0);
    EXPECT_TRUE(std::isnan(scalar(r, "perplexity")));
    EXPECT_TRUE(std::isnan(scalar(r, "full_perplexity")));
    return;
  }
  FAIL() << "no seed sampled a first token other than the greedy one";
}

TEST_F(LiveStreaming, RopeInCacheEqualsOriginalPositionsUntilTheFirstEvictionThenDiffers) {
  // Positions inside the cache (POLICIES.md §1 pos-shift) equal the original ones while nothing
  // was evicted; after that the kept keys get smaller rotations and the logits change.
  Engine plain(st_->model, single_thread()), shifted(st_->model, single_thread(true));
  const ReferenceRun ref = run_reference(plain, prompt_, kSteps, {}, {});
  const ReferenceRun ref_shifted = run_reference(shifted, prompt_, kSteps, ref.tokens, {});
  EXPECT_EQ(ref_shifted.logits, ref.logits);  // full cache: every slot is its position
  const int P = static_cast<int>(prompt_.size()), vocab = st_->model.config.vocab_size;
  LogitsTap a(P), b(P);
  run(plain, ref, "forced", &a);
  run(shifted, ref, "forced", &b);
  const int first_lossy = kBudget + 1 - P;
  ASSERT_EQ(a.logits.size(), b.logits.size());
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<float> la(a.logits.begin() + s * vocab, a.logits.begin() + (s + 1) * vocab);
    const std::vector<float> lb(b.logits.begin() + s * vocab, b.logits.begin() + (s + 1) * vocab);
    if (s < first_lossy) EXPECT_EQ(la, lb) << "step " << s;
    else EXPECT_NE(la, lb) << "step " << s;
  }
}

}  // namespace
