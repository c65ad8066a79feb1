// DuoAttention's static path, live on stories260K: with prefill_chunk the prompt goes in chunks,
// a streaming head's query in a later chunk reading the sink + recent slots of the tokens before
// its chunk and its chunk up to itself. The run's log-probabilities match an independent naive
// forward pass masked that way (original positions and RoPE inside the cache), differ from the
// whole-prefill run's, and the cache peaks lower.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "analysis/policy_duoattention.h"
#include "live_run_fixture.h"
#include "tests/inference/tiny_model.h"

using namespace kvs;
using namespace kvs::test;

namespace {

constexpr int kSink = 4, kRecent = 8, kChunk = 16, kSteps = 8;

class LiveDuoChunks : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    st_ = stories();
    if (!st_) GTEST_SKIP() << "stories260K model files absent";
    prompt_ = st_->tok->encode(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
        "friends. One day, she saw a big red ball under a tree. She ran to get it, but a dog came and took the "
        "ball away. Lily was sad, so her mom gave her a hug.",
        true);
  }
  RunData run(Engine& engine, const ReferenceRun& ref, int chunk) {
    std::string spec = "duoattention:gates=estimated,sink=" + std::to_string(kSink);
    if (chunk > 0) spec += ",prefill_chunk=" + std::to_string(chunk);
    auto p = make_policy(parse_policy_spec(spec, kSink + kRecent), shape_of(st_->model));
    PolicyContext ctx;
    ctx.alpha = test_alpha(shape_of(st_->model));
    return live_run(engine, *p, ctx, ref, *st_->tok, {});
  }
  const Stories* st_ = nullptr;
  std::vector<int> prompt_;
};

TEST_P(LiveDuoChunks, StreamingHeadsReadSinkRecentAndTheirChunk) {
  const bool rope_in_cache = GetParam();
  Engine engine(st_->model, single_thread(rope_in_cache));
  const ReferenceRun ref = run_reference(engine, prompt_, kSteps, {}, {});
  const RunData chunked = run(engine, ref, kChunk);
  const RunData whole = run(engine, ref, 0);
  const int P = static_cast<int>(prompt_.size());
  ASSERT_GT(P, 4 * kChunk) << "the prompt must span several chunks";

  const ModelShape shape = shape_of(st_->model);
  const std::vector<uint8_t> retrieval = duo_retrieval_by_sparsity(test_alpha(shape), 0.5);
  // Of the positions before b, a streaming head holds the first kSink and the last kRecent.
  auto sink_recent = [](int k, int b) { return k < kSink || k >= b - kRecent; };
  auto attends = [&](int l, int g, int q, int k) {
    if (retrieval[static_cast<size_t>(l) * shape.n_kv_heads + g] || q < kChunk) return true;
    if (q >= P) return k == q || sink_recent(k, q);  // decode: trimmed after every step
    const int b = q / kChunk * kChunk;               // the query's chunk starts at b
    return k >= b || sink_recent(k, b);
  };
  std::vector<int> tokens = prompt_;
  tokens.insert(tokens.end(), ref.tokens.begin(), ref.tokens.end());
  const tiny::Reference naive = tiny::reference_forward(st_->model, tokens, attends, rope_in_cache);

  const int V = st_->model.config.vocab_size;
  const std::vector<float>& lp = metric(chunked, "ref_logprob").data;
  const std::vector<float>& whole_lp = metric(whole, "ref_logprob").data;
  ASSERT_EQ(lp.size(), static_cast<size_t>(kSteps));
  double moved = 0.0;  // how far chunking moves the log-probabilities from the whole prefill's
  for (int s = 0; s < kSteps; ++s) {
    const double* l = naive.logits.data() + static_cast<size_t>(P + s) * V;  // [V] the query at P + s
    const double m = *std::max_element(l, l + V);
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(l[v] - m);
    EXPECT_NEAR(lp[s], l[ref.next[s]] - m - std::log(sum), 1e-4) << "step " << s;
    moved = std::max(moved, std::abs(static_cast<double>(lp[s]) - whole_lp[s]));
  }
  EXPECT_GT(moved, 1e-3) << "the chunks made no difference: the test shows nothing";
  // Streaming heads never held the whole prompt.
  EXPECT_LT(scalar(chunked, "peak_kv_bytes"), scalar(whole, "peak_kv_bytes"));
  // The decode steps' kept sets are the same either way.
  EXPECT_EQ(chunked.kept, whole.kept);
}

INSTANTIATE_TEST_SUITE_P(Positions, LiveDuoChunks, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "RopeInCache" : "Original"; });

}  // namespace
