// KVzip key scores on stories260K: range, sinks, chunking, the restricted key set, determinism,
// and agreement with passes fed as decode steps on a fresh prefill each (the scorer prefills once,
// feeds each pass batched and rewinds).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/kvzip_scores.h"
#include "inference/errors.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

class KvzipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = test::shared_path("models/stories260K/");
    model_ = load_model(dir + "stories260K.bin");
    tok_ = load_tokenizer(model_, dir + "tok512.bin");
    context_ = tok_->encode(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.",
        true);
    opt_.engine.n_threads = 1;
  }
  Model model_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<int> context_;
  KvzipOptions opt_;
};

TEST_F(KvzipTest, ScoresInUnitRangeWithSinksAtOne) {
  const int L = model_.config.n_layers, Hkv = model_.config.n_kv_heads, P = (int)context_.size();
  std::vector<float> s = kvzip_key_scores(model_, *tok_, context_, opt_);
  ASSERT_EQ(s.size(), (size_t)L * Hkv * P);
  for (int row = 0; row < L * Hkv; ++row) {
    for (int j = 0; j < P; ++j) {
      const float v = s[(size_t)row * P + j];
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
      if (j < 4) {
        EXPECT_EQ(v, 1.0f);
      }
    }
    // Every key is seen by some repeat query, so its score is positive.
    EXPECT_GT(*std::min_element(s.begin() + (size_t)row * P, s.begin() + (size_t)(row + 1) * P), 0.0f);
  }
  EXPECT_EQ(kvzip_key_scores(model_, *tok_, context_, opt_), s);  // deterministic
}

TEST_F(KvzipTest, ChunksRestrictTheKeySet) {
  const int P = (int)context_.size();
  std::vector<float> whole = kvzip_key_scores(model_, *tok_, context_, opt_);
  KvzipOptions chunked = opt_;
  chunked.chunk = 16;
  std::vector<float> parts = kvzip_key_scores(model_, *tok_, context_, chunked);
  ASSERT_EQ(parts.size(), whole.size());
  // Sinks stay 1; other keys compete with fewer keys per pass, so scores differ but stay valid.
  bool differs = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_GE(parts[i], 0.0f);
    EXPECT_LE(parts[i], 1.0f);
    if ((int)(i % P) < 4) {
      EXPECT_EQ(parts[i], 1.0f);
    }
    differs |= parts[i] != whole[i];
  }
  EXPECT_TRUE(differs);
}

// Every pass recomputed as decode steps on a fresh prefill of the context, through the engine's
// public API: the scorer's one prefill, batched passes and rewinds give the same scores (within
// fp32 rounding: the batched pass sums in another order). The options must give at least
// `min_passes` passes and one of at least `min_feed` tokens.
void expect_scores_of_decode_steps(const Model& model, const Tokenizer& tok, const std::vector<int>& context,
                                   const KvzipOptions& o, int min_passes, std::size_t min_feed) {
  const std::vector<float> got = kvzip_key_scores(model, tok, context, o);
  const ModelConfig& c = model.config;
  const int P = static_cast<int>(context.size());
  const int chunk = std::min(o.chunk, c.seq_len - P - std::max<int>(tok.encode(o.repeat_text, false).size(),
                                                                    tok.encode(o.continue_text, false).size() + o.overlap));
  const std::vector<int> first = tok.encode(o.repeat_text, false), later = tok.encode(o.continue_text, false);
  KvzipScoreObserver observer(c.n_layers, c.n_heads, c.n_kv_heads, P);
  Engine engine(model, o.engine);
  int passes = 0;
  std::size_t longest = 0;
  for (int begin = 0; begin < P; begin += chunk, ++passes) {
    const int end = std::min(P, begin + chunk);
    std::vector<int> feed = begin == 0 ? first : later;
    if (begin > 0) feed.insert(feed.end(), context.begin() + begin - o.overlap, context.begin() + begin);
    feed.insert(feed.end(), context.begin() + begin, context.begin() + end);
    engine.prefill(context);
    KvzipChunkController restrict_keys(o.sinks, begin, end, P);
    const EngineAttachment attached(engine, &observer, &restrict_keys);
    for (int t : feed) engine.decode(t);
    longest = std::max(longest, feed.size());
  }
  ASSERT_GE(passes, min_passes);
  ASSERT_GE(longest, min_feed);
  std::vector<float> want = observer.scores();
  for (int row = 0; row < c.n_layers * c.n_kv_heads; ++row) std::fill_n(want.begin() + row * P, o.sinks, 1.0f);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "score " << i;
}

TEST_F(KvzipTest, BatchedPassesEqualDecodeStepsOnAFreshPrefill) {
  KvzipOptions o = opt_;
  o.chunk = 12;
  o.overlap = 3;
  expect_scores_of_decode_steps(model_, *tok_, context_, o, 3, 1);
}

// A pass longer than the scorer's pieces of 256 tokens: a 230-token context and a long repeat
// prompt, one pass in stories260K's context of 512.
TEST_F(KvzipTest, APassLongerThanAPieceEqualsDecodeSteps) {
  std::vector<int> context = context_;
  while (context.size() < 230) context.insert(context.end(), context_.begin() + 1, context_.end());
  context.resize(230);
  KvzipOptions o = opt_;
  o.repeat_text = "Now repeat the whole story above exactly as it was told, word for word, from its first word "
                  "to its last.";
  expect_scores_of_decode_steps(model_, *tok_, context, o, 1, 257);
}

TEST_F(KvzipTest, ControllerAndObserver) {
  // Controller: sinks 2, chunk [5, 8), context 10 -> active {0,1,5,6,7} and the repeat keys >= 10.
  class Slots : public KvSlots {
   public:
    Slots() { for (int i = 0; i < 12; ++i) pos_.push_back(i); act_.assign(2, std::vector<uint8_t>(12, 1)); }
    int n_layers() const override { return 1; }
    int n_kv_heads() const override { return 2; }
    std::span<const int32_t> held(int, int) const override { return pos_; }
    std::span<uint8_t> active(int, int g) override { return act_[g]; }
    void evict(int, int, std::span<const uint8_t>) override {}
    std::vector<int32_t> pos_;
    std::vector<std::vector<uint8_t>> act_;
  } kv;
  KvzipChunkController c(2, 5, 8, 10);
  c.before_attention(0, 11, kv);
  std::vector<uint8_t> want = {1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
  EXPECT_EQ(kv.act_[0], want);
  EXPECT_EQ(kv.act_[1], want);
  // Observer: max over the group's query heads and over queries, context keys only.
  KvzipScoreObserver obs(1, 4, 2, 3);  // group 2, P = 3
  std::vector<int32_t> keys = {0, 2, 3};
  auto feed = [&](int head, std::vector<float> p, bool decode) {
    AttentionBlock b;
    b.head = head;
    b.n_q = 1;
    b.n_keys = 3;
    b.key_pos = keys.data();
    b.probs = p.data();
    b.decode = decode;
    obs.on_attention(b);
  };
  feed(0, {0.2f, 0.3f, 0.5f}, true);
  feed(1, {0.6f, 0.1f, 0.3f}, true);
  feed(2, {0.1f, 0.1f, 0.8f}, true);
  feed(0, {0.9f, 0.05f, 0.05f}, false);  // prefill rows do not count
  EXPECT_EQ(obs.scores(), (std::vector<float>{0.6f, 0.0f, 0.3f, 0.1f, 0.0f, 0.1f}));
}

TEST_F(KvzipTest, BadInputIsInputError) {
  EXPECT_THROW(kvzip_key_scores(model_, *tok_, std::vector<int>{}, opt_), InputError);
  KvzipOptions bad = opt_;
  bad.chunk = 0;
  EXPECT_THROW(kvzip_key_scores(model_, *tok_, context_, bad), InputError);
  std::vector<int> too_long(model_.config.seq_len - 4, 300);  // no room left for the repeat pass
  EXPECT_THROW(kvzip_key_scores(model_, *tok_, too_long, opt_), InputError);
}

}  // namespace
}  // namespace kvs
