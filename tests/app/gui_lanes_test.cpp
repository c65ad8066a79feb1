// The app's data preparation (no GUI needed): lane cell states from kept sets, positional roles
// from run parameters, lane differences, first divergence of generated texts, per-step series,
// token text on one line, what a run has at a step (ended, its own tokens).
#include <gtest/gtest.h>

#include "analysis/divergence.h"
#include "analysis/lanes.h"
#include "analysis/trace_snapshot.h"
#include "app/views/run_at_step.h"

namespace kvs {
namespace {

using S = CellState;

// One layer, two KV heads, 10 positions, query at 7; roles: 2 sinks, recent [4, 7], scored.
struct LaneFixture : ::testing::Test {
  ModelShape shape{1, 4, 2, 8};
  static constexpr int T = 10, q = 7;
  LaneRoles roles{2, 3, true};
  // kept [L=1, Hkv=2, T]: head 0 holds 0,1 (sinks), 3 (scored), 4..7; head 1 holds 0,1, 4..7 and
  // keeps 6 inactive. Position 2 was held by head 1 at the previous step.
  std::vector<uint8_t> kept = {1, 1, 0, 1, 1, 1, 1, 1, 0, 0,
                               1, 1, 0, 0, 1, 1, 2, 1, 0, 0};
  std::vector<uint8_t> prev = {1, 1, 0, 1, 1, 1, 1, 0, 0, 0,
                               1, 1, 1, 0, 1, 1, 1, 0, 0, 0};
};

TEST_F(LaneFixture, AggregateStatesAndHeldFractions) {
  const LaneCells c = build_lane(kept.data(), prev.data(), shape, T, q, roles, -1, -1);
  const std::vector<S> want = {S::kSink, S::kSink, S::kEvictedNow, S::kHeavy, S::kRecent,
                               S::kRecent, S::kRecent, S::kRecent, S::kFuture, S::kFuture};
  for (int t = 0; t < T; ++t) EXPECT_EQ((S)c.state[t], want[t]) << "position " << t;
  EXPECT_FLOAT_EQ(c.held[3], 0.5f);  // one of two KV heads
  EXPECT_FLOAT_EQ(c.held[6], 1.0f);  // inactive in head 1 still holds it
  EXPECT_FLOAT_EQ(c.held[2], 0.0f);
  EXPECT_FLOAT_EQ(c.attended[6], 0.5f);  // ... but only head 0 attends it
  EXPECT_FLOAT_EQ(c.attended[3], 0.5f);
  EXPECT_FLOAT_EQ(c.attended[4], 1.0f);
  EXPECT_FLOAT_EQ(c.attended[2], 0.0f);
  EXPECT_EQ(c.counts[(int)S::kRecent], 4);
  EXPECT_EQ(c.counts[(int)S::kFuture], 2);
}

TEST_F(LaneFixture, OneHeadShowsItsOwnEvictionsAndInactiveKeys) {
  const LaneCells h1 = build_lane(kept.data(), prev.data(), shape, T, q, roles, 0, 1);
  EXPECT_EQ((S)h1.state[2], S::kEvictedNow);      // head 1 held 2 at the previous step
  EXPECT_EQ((S)h1.state[3], S::kEvictedEarlier);  // head 1 never held 3
  EXPECT_EQ((S)h1.state[6], S::kInactive);
  EXPECT_FLOAT_EQ(h1.held[6], 1.0f);
  EXPECT_FLOAT_EQ(h1.attended[6], 0.0f);
  const LaneCells h0 = build_lane(kept.data(), prev.data(), shape, T, q, roles, 0, 0);
  EXPECT_EQ((S)h0.state[2], S::kEvictedEarlier);
  EXPECT_EQ((S)h0.state[3], S::kHeavy);
  EXPECT_EQ((S)h0.state[6], S::kRecent);
}

TEST_F(LaneFixture, WithoutAPreviousStepNothingIsEvictedNow) {
  const LaneCells c = build_lane(kept.data(), nullptr, shape, T, q, roles, -1, -1);
  EXPECT_EQ((S)c.state[2], S::kEvictedEarlier);
  EXPECT_EQ(c.counts[(int)S::kEvictedNow], 0);
}

TEST_F(LaneFixture, PrefillOncePolicyCountsItsWindowAndDecodeTokensAsRecent) {
  const LaneCells c = build_lane(kept.data(), prev.data(), shape, T, q, LaneRoles{0, 0, true, 6}, -1, -1);
  EXPECT_EQ((S)c.state[3], S::kHeavy);
  EXPECT_EQ((S)c.state[5], S::kHeavy);
  EXPECT_EQ((S)c.state[6], S::kRecent);
  EXPECT_EQ((S)c.state[7], S::kRecent);
}

TEST_F(LaneFixture, UnscoredPolicyShowsPlainKept) {
  const LaneCells c = build_lane(kept.data(), prev.data(), shape, T, q, LaneRoles{0, 0, false}, -1, -1);
  EXPECT_EQ((S)c.state[0], S::kKept);
  EXPECT_EQ((S)c.state[3], S::kKept);
}

TEST(LaneRoles, FromRunParameters) {
  RunData s;
  s.policy = "streamingllm";
  s.params_json = "{\"sinks\":4,\"recent\":60}";
  s.budget = 64;
  const LaneRoles r = lane_roles(s, 100);
  EXPECT_EQ(r.sinks, 4);
  EXPECT_EQ(r.recent, 60);
  EXPECT_FALSE(r.scored);
  RunData w;
  w.policy = "window";  // no parameters: the window is the budget
  w.budget = 32;
  EXPECT_EQ(lane_roles(w, 100).recent, 32);
  RunData h;
  h.policy = "h2o";
  h.params_json = "{\"heavy\":16,\"recent\":16,\"gqa\":\"mean\"}";
  EXPECT_TRUE(lane_roles(h, 100).scored);
  EXPECT_EQ(lane_roles(h, 100).recent, 16);
  EXPECT_EQ(lane_roles(h, 100).recent_from, -1);
  RunData k;  // prefill-once: the observation window and every decode token are recent
  k.policy = "snapkv";
  k.params_json = "{\"window\":32,\"kernel\":5}";
  EXPECT_EQ(lane_roles(k, 100).recent_from, 68);
  RunData d;  // DuoAttention's streaming heads: "sink" tokens and a recent window, as StreamingLLM's
  d.policy = "duoattention";
  d.params_json = "{\"sparsity\":0.5,\"sink\":4,\"recent\":28}";
  EXPECT_EQ(lane_roles(d, 100).sinks, 4);
  EXPECT_EQ(lane_roles(d, 100).recent, 28);
  RunData o;  // OmniKV selects among prompt keys; decode keys are always attended
  o.policy = "omnikv";
  o.params_json = "{\"filters\":[1],\"wait\":1}";
  EXPECT_TRUE(lane_roles(o, 100).scored);
  EXPECT_EQ(lane_roles(o, 100).recent_from, 100);
  EXPECT_EQ(json_number("{\"a\": 2.5}", "a", -1), 2.5);
  EXPECT_EQ(json_number("{\"a\":\"x\"}", "a", -1), -1);
  EXPECT_EQ(json_number("{}", "a", 7), 7);
}

// A free run whose text ended before the step has every key absent there: the lanes say so
// rather than drawing every key evicted (a run holding only inactive keys still holds some).
TEST(RunAtStep, AStepWithNoKeyHeldIsARunThatEnded) {
  EXPECT_FALSE(run_holds_keys({0, 0, 0, 0}));
  EXPECT_FALSE(run_holds_keys({}));
  EXPECT_TRUE(run_holds_keys({0, 1, 0, 0}));
  EXPECT_TRUE(run_holds_keys({0, 0, 2, 0}));
  EXPECT_NE(run_ended_note(40).find("ended before step 40"), std::string::npos);
}

// Past a free run's first divergence its lane's keys are its own tokens: the hover names them.
TEST(RunAtStep, OwnTokenWhereTheRunLeftTheRecording) {
  TraceSnapshot t;
  t.token_ids = {1, 2, 3};
  t.token_texts = {"a", "b", "c"};
  RunData run;
  run.tokens = {1, 3, 9};
  EXPECT_EQ(run_own_token_note(t, run, 0), "");  // the same token
  EXPECT_EQ(run_own_token_note(t, run, 1), "own token here: \"c\" (id 3)");
  EXPECT_EQ(run_own_token_note(t, run, 2), "own token here: (id 9)");  // an id the recording lacks
  EXPECT_EQ(run_own_token_note(t, RunData{}, 1), "");  // a simulated run has no tokens of its own
}

TEST(LaneDifference, MarksWhoHoldsEachToken) {
  LaneCells a, b;
  a.held = {1.0f, 0.0f, 0.5f, 0.0f};
  b.held = {0.0f, 1.0f, 0.25f, 0.0f};
  EXPECT_EQ(lane_difference(a, b), (std::vector<uint8_t>{1, 2, 3, 0}));
}

TEST(Divergence, TokensAndUtf8Text) {
  EXPECT_EQ(first_divergence(std::vector<int>{1, 2, 3}, std::vector<int>{1, 2, 3}), -1);
  EXPECT_EQ(first_divergence(std::vector<int>{1, 2, 3}, std::vector<int>{1, 5, 3}), 1);
  EXPECT_EQ(first_divergence(std::vector<int>{1, 2}, std::vector<int>{1, 2, 3}), 2);
  // "é" is C3 A9 and "è" is C3 A8: they differ in the second byte; the marker goes to the first.
  EXPECT_EQ(first_text_divergence("caf\xC3\xA9!", "caf\xC3\xA8!"), 3);
  EXPECT_EQ(first_text_divergence("same", "same"), -1);
}

// Token text on one line (labels, tooltips, CSV): control characters as escape text, the rest as
// stored; an older trace's "\x0A" reads as the newline it stood for.
TEST(TokenLabel, ControlCharactersBecomeEscapeText) {
  EXPECT_EQ(token_label("\n"), "\\n");
  EXPECT_EQ(token_label("a\tb\r\n"), "a\\tb\\r\\n");
  EXPECT_EQ(token_label(std::string("\x1b[2J\x7f")), "\\x1B[2J\\x7F");
  EXPECT_EQ(token_label("\\x0A"), "\\n");
  EXPECT_EQ(token_label("\\xF0"), "\\xF0");  // a byte of a split character, as stored
  EXPECT_EQ(token_label(" caf\xC3\xA9, \"x\""), " caf\xC3\xA9, \"x\"");
  EXPECT_EQ(running_text("\\x0D"), "\r");
  EXPECT_EQ(running_text("\\x00"), "\\x00");  // NUL stays escaped
  EXPECT_EQ(running_text("\\x0G"), "\\x0G");
}

// The running text of a recording: a character split over byte tokens (stored "\xE6", "\x97",
// "\xA5") reads as the character; a byte that stays invalid, or literal "\x41", stays as stored.
TEST(JoinedText, SplitCharactersAreJoinedBack) {
  const std::vector<std::string> split = {"A", "\\xE6", "\\x97", "\\xA5", "\n"};
  EXPECT_EQ(joined_text(split), "A\xE6\x97\xA5\n");
  const std::vector<std::string> half = {"\\xE6", "x", "\\x41", "\\x0A"};
  EXPECT_EQ(joined_text(half), "\\xE6x\\x41\n");
  EXPECT_EQ(joined_text(std::vector<std::string>{}), "");
}

TEST(PerStepSeries, MeansOverTrailingDimensions) {
  NamedArray m{"recall", {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}};
  EXPECT_EQ(per_step_series(m), (std::vector<float>{2.5f, 6.5f}));
  NamedArray flat{"kv_bytes", {3}, {10, 20, 30}};
  EXPECT_EQ(per_step_series(flat), (std::vector<float>{10, 20, 30}));
  EXPECT_TRUE(per_step_series(NamedArray{}).empty());
}

}  // namespace
}  // namespace kvs
