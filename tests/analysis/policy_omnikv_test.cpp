// OmniKV: filter layers select prompt positions from raw logits (head max) or with the variant
// selectors (softmax_before_last, uniform, exp), sparse layers mark the rest inactive; layer
// roles and default filter layers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/policy_omnikv.h"
#include "analysis/position_slots.h"
#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using namespace kvs::test;

TEST(OmniKv, LayerRolesMatchThePaperExample) {
  const std::vector<OmniRole> r = omnikv_layer_roles(32, {2, 8, 18}, 1);
  std::vector<int> dense, sparse;
  for (int l = 0; l < 32; ++l) (r[l] == OmniRole::Sparse ? sparse : dense).push_back(l);
  EXPECT_EQ(dense, (std::vector<int>{0, 1, 2, 3, 8, 9, 18, 19}));
  EXPECT_EQ(sparse.size(), 24u);
  EXPECT_EQ(r[2], OmniRole::Filter);
  EXPECT_EQ(r[9], OmniRole::Wait);
}

TEST(OmniKv, DefaultFilterLayers) {
  EXPECT_EQ(omnikv_default_filters(32), (std::vector<int>{4, 13, 22}));
  EXPECT_EQ(omnikv_default_filters(30), (std::vector<int>{3, 12, 21}));
  EXPECT_EQ(omnikv_default_filters(5), (std::vector<int>{2}));
  EXPECT_EQ(omnikv_default_filters(1), (std::vector<int>{0}));
}

// L=4, H=2, Hkv=1, P=10, filter layer 1, wait 1: layer 3 is sparse.
TEST(OmniKv, SelectsByHeadMaxOfRawLogitsAndSkipsTheRest) {
  const ModelShape shape = shape_of(4, 2, 1);
  SimInput in = random_input(shape, 10, 2, 4, 61);
  const int T = in.total_len;
  auto row = [&](int s, int l, int h) { return in.rows.data() + (((size_t)s * 4 + l) * 2 + h) * T; };
  auto lse = [&](int s, int l, int h) -> float& { return in.lse[((size_t)s * 4 + l) * 2 + h]; };
  // Step 0 (q = 10), layer 1: head 0 peaks at 2 and 5 (lse 0), head 1 at 7 (lse 1). Raw logits:
  // head 1 at 7 = log .5 + 1 = .31; head 0 at 2, 5 = log .3 = -1.20; all else <= -2.0.
  std::fill(row(0, 1, 0), row(0, 1, 0) + T, 0.0f);
  std::fill(row(0, 1, 1), row(0, 1, 1) + T, 0.0f);
  for (int j = 0; j <= 10; ++j) {
    row(0, 1, 0)[j] = (j == 2 || j == 5) ? 0.3f : 0.4f / 9.0f;
    row(0, 1, 1)[j] = j == 7 ? 0.5f : 0.05f;
  }
  lse(0, 1, 0) = 0.0f;
  lse(0, 1, 1) = 1.0f;
  // Step 1 (q = 11), layer 1: uniform rows -> all ties -> the newest prompt positions 7, 8, 9.
  for (int h = 0; h < 2; ++h) {
    std::fill(row(1, 1, h), row(1, 1, h) + T, 1.0f / 12.0f);
    lse(1, 1, h) = 0.0f;
  }
  auto p = policy("omnikv:filters=1,wait=1", 3, shape);
  const RunData r = run_one(in, *p);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(kept_at(r, in, 0, l, 0), range(0, 11)) << l;
  EXPECT_EQ(kept_at(r, in, 0, 3, 0), (std::vector<int>{2, 5, 7, 10}));
  EXPECT_EQ(kept_at(r, in, 0, 3, 0, 2), (std::vector<int>{0, 1, 3, 4, 6, 8, 9}));
  EXPECT_EQ(kept_at(r, in, 1, 3, 0), (std::vector<int>{7, 8, 9, 10, 11}));
  const NamedArray* inactive = metric(r, "inactive");
  EXPECT_FLOAT_EQ(inactive->data[3], 7.0f);  // step 0, layer 3
  EXPECT_FLOAT_EQ(metric(r, "evicted")->data[3], 0.0f);
}

TEST(OmniKv, FracAndBudgetCoveringPrompt) {
  const ModelShape shape = shape_of(6, 4, 2);
  const SimInput in = random_input(shape, 20, 3, 4, 62);
  auto p = policy("omnikv:filters=1", 20, shape);
  const RunData r = run_one(in, *p);
  for (float v : metric(r, "recall")->data) EXPECT_NEAR(v, 1.0f, 1e-5);
  auto f = policy("omnikv:filters=1,frac=0.25", 1, shape);
  const RunData rf = run_one(in, *f);
  EXPECT_EQ(kept_at(rf, in, 0, 5, 1).size(), 5u + 1u);  // k = 0.25 * 20 prompt + the query
  EXPECT_NE(rf.params_json.find("\"k\":5"), std::string::npos);
}

// frac=F is the run's budget: k = max(1, floor(F * P)) names the run and is what topk_miss
// compares with; budget=N beside it is refused, other specs are left alone.
TEST(OmniKv, FracResolvesTheBudgetFromThePrompt) {
  PolicySpec spec = parse_policy_spec("omnikv:frac=0.067", 16);
  EXPECT_TRUE(omnikv_budget_from_frac(spec));
  resolve_omnikv_frac(spec, 412);
  EXPECT_EQ(spec.budget, 27);
  EXPECT_EQ(spec.run_name(), "omnikv_frac0.067_b27");
  PolicySpec tiny = parse_policy_spec("omnikv:frac=0.01", 0);
  resolve_omnikv_frac(tiny, 20);
  EXPECT_EQ(tiny.budget, 1);
  PolicySpec plain = parse_policy_spec("omnikv", 16);
  EXPECT_FALSE(omnikv_budget_from_frac(plain));
  resolve_omnikv_frac(plain, 412);
  EXPECT_EQ(plain.budget, 16);
  try {
    parse_policy_spec("omnikv:frac=0.1,budget=8", 0);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--policy omnikv:frac=0.1,budget=8: give budget or frac (a fraction of the prompt), not both");
  }
  // frac is OmniKV's alone: beside another policy's budget=N it is left to that policy to refuse.
  EXPECT_NO_THROW(parse_policy_spec("h2o:budget=8,frac=0.1", 0));
}

namespace {

std::string error_of(const std::string& text, const ModelShape& shape) {
  try {
    policy(text, 4, shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The message of the InputError a run throws, "" if none.
std::string run_error(const SimInput& in, const std::string& text, int budget) {
  auto p = policy(text, budget, in.shape);
  try {
    run_one(in, *p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Copies `vals` to dst[0..], zeros up to len.
void put(float* dst, int len, const std::vector<float>& vals) {
  std::fill(dst, dst + len, 0.0f);
  std::copy(vals.begin(), vals.end(), dst);
}

// L=4, H=2 (both heads alike), Hkv=1, P=8, 4 decode steps (q = 8..11), filter layer 1 with
// wait 1: layer 3 is sparse. Layer 1's rows, as head-maxed softmax over the prompt v_i:
//   prompt rows (evidence, W=4: positions 4..7)
//     v4 = .2 on 0..4;  v5 = .5 at 4, .1 on 0..3, 5;  v6 = .88 at 0, .02 on 1..6;
//     v7 = .58 at 2, .06 on 0, 1, 3..7
//   decode rows (own/generated keys take the rest of the mass, dropped by the prompt softmax)
//     q8:  .56 at 1, .03 elsewhere (prompt .77)  -> v8  = .7273 at 1, .0390 elsewhere
//     q9:  .50 at 3, .05 elsewhere (prompt .85)  -> v9  = .5882 at 3, .0588 elsewhere
//     q10: .40 at 5, .05 elsewhere (prompt .75)  -> v10 = .5333 at 5, .0667 elsewhere
//     q11: .45 at 6, .05 elsewhere (prompt .80)  -> v11 = .5625 at 6, .0625 elsewhere
SimInput window_input() {
  const ModelShape shape = shape_of(4, 2, 1);
  SimInput in = random_input(shape, 8, 4, 4, 63);
  const int P = 8, T = in.total_len, W = in.prefill.window;
  for (int h = 0; h < 2; ++h) {
    auto ev_row = [&](int pos) { return in.prefill.window_rows.data() + (((size_t)1 * 2 + h) * W + pos - (P - W)) * P; };
    put(ev_row(4), P, {.2f, .2f, .2f, .2f, .2f});
    put(ev_row(5), P, {.1f, .1f, .1f, .1f, .5f, .1f});
    put(ev_row(6), P, {.88f, .02f, .02f, .02f, .02f, .02f, .02f});
    put(ev_row(7), P, {.06f, .06f, .58f, .06f, .06f, .06f, .06f, .06f});
    auto row = [&](int s) { return in.rows.data() + (((size_t)s * 4 + 1) * 2 + h) * T; };
    put(row(0), T, {.03f, .56f, .03f, .03f, .03f, .03f, .03f, .03f, .23f});
    put(row(1), T, {.05f, .05f, .05f, .5f, .05f, .05f, .05f, .05f, .05f, .10f});
    put(row(2), T, {.05f, .05f, .05f, .05f, .05f, .4f, .05f, .05f, .05f, .05f, .15f});
    put(row(3), T, {.05f, .05f, .05f, .05f, .05f, .05f, .45f, .05f, .05f, .05f, .05f, .05f});
  }
  return in;
}

// The selected prompt positions at step s (kept_at of the sparse layer 3, generated positions
// dropped).
std::vector<int> prompt_kept(const RunData& r, const SimInput& in, int s) {
  std::vector<int> out;
  for (int p : kept_at(r, in, s, 3, 0))
    if (p < in.prompt_len) out.push_back(p);
  return out;
}

}  // namespace

// P=6, H=2, k=1, step 0 (q = 6), filter layer 1. Head 0: .2 at 2, .04 on the other prompt
// positions, .6 on its own key (prompt mass .4); head 1: .4 at 4, .12 elsewhere (prompt mass 1).
// last: raw logits (lse 0) log .2 < log .4 -> 4. softmax_before_last: head 0 renormalized over
// the prompt puts .5 at 2, head 1 .4 at 4 -> 2 (raw probabilities would also pick 4).
TEST(OmniKv, SoftmaxBeforeLastRenormalizesOverThePromptBeforeTheHeadMax) {
  const ModelShape shape = shape_of(4, 2, 1);
  SimInput in = random_input(shape, 6, 1, 4, 64);
  const int T = in.total_len;
  auto row = [&](int h) { return in.rows.data() + ((size_t)1 * 2 + h) * T; };
  put(row(0), T, {.04f, .04f, .2f, .04f, .04f, .04f, .6f});
  put(row(1), T, {.12f, .12f, .12f, .12f, .4f, .12f, 0.0f});
  in.lse[1 * 2 + 0] = 0.0f;
  in.lse[1 * 2 + 1] = 0.0f;
  auto last = policy("omnikv:filters=1", 1, shape);
  EXPECT_EQ(kept_at(run_one(in, *last), in, 0, 3, 0), (std::vector<int>{4, 6}));
  auto sbl = policy("omnikv:filters=1,selector=softmax_before_last", 1, shape);
  const RunData r = run_one(in, *sbl);
  EXPECT_EQ(kept_at(r, in, 0, 3, 0), (std::vector<int>{2, 6}));
  EXPECT_EQ(kept_at(r, in, 0, 3, 0, 2), (std::vector<int>{0, 1, 3, 4, 5}));
  EXPECT_EQ(kept_at(r, in, 0, 2, 0), range(0, 7));  // the wait layer stays dense
}

// uniform, window=3, k=4 (see window_input; while prompt positions are forced, each query's
// softmax runs over the scored keys only, so its v_i above is renormalized over them):
// t=8:  queries 6, 7, 8; 6 and 7 forced, 2 scored of 0..5: 0 (1.008), 1 (.877) over 2 (.722).
// t=9:  queries 7, 8, 9; 7 forced, 3 scored of 0..6: 1 (.883), 3 (.729), 2 (.720).
// t=10: queries 8, 9, 10; 4 scored: 1 (.853), 3 (.694), 5 (.631), then a tie (.1645) on
//       0, 2, 4, 6, 7 -> the newest, 7.
// t=11: queries 9, 10, 11 (11 replaced 8 in the ring): 3 (.717), 6 (.688), 5 (.654), tie -> 7;
//       1 falls to .188 with 8 out of the window.
TEST(OmniKv, UniformSumsTheWindowAndForcesPromptPositionsInsideIt) {
  const SimInput in = window_input();
  auto p = policy("omnikv:filters=1,selector=uniform,window=3", 4, in.shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(prompt_kept(r, in, 0), (std::vector<int>{0, 1, 6, 7}));
  EXPECT_EQ(prompt_kept(r, in, 1), (std::vector<int>{1, 2, 3, 7}));
  EXPECT_EQ(prompt_kept(r, in, 2), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(prompt_kept(r, in, 3), (std::vector<int>{3, 5, 6, 7}));
  EXPECT_EQ(kept_at(r, in, 3, 3, 0), (std::vector<int>{3, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_FLOAT_EQ(metric(r, "inactive")->data[3 * 4 + 3], 4.0f);  // step 3, layer 3
}

// exp, window=3, k=4: weights 1/4, 1/2, 1 (oldest first). t=8: 1 (.828), 2 (.377) beat 0
// (.301), which uniform kept: query 6's .88 at 0 now counts a quarter. Later steps keep the same
// sets as uniform (t=9: 3 .661, 1 .457, 2 .237; t=10: 5, 3, 1, tie -> 7; t=11: 6, 5, 3, 7).
TEST(OmniKv, ExpWeightsTheWindowByAge) {
  const SimInput in = window_input();
  auto p = policy("omnikv:filters=1,selector=exp,window=3", 4, in.shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(prompt_kept(r, in, 0), (std::vector<int>{1, 2, 6, 7}));
  EXPECT_EQ(prompt_kept(r, in, 1), (std::vector<int>{1, 2, 3, 7}));
  EXPECT_EQ(prompt_kept(r, in, 2), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(prompt_kept(r, in, 3), (std::vector<int>{3, 5, 6, 7}));
}

// uniform, window=4, k=2: forced prompt positions count inside k, at least one is scored.
// t=8:  5, 6, 7 forced (3 >= k): 1 scored of 0..4: 0 (1.145 over 1 1.029).
// t=9:  6, 7 forced: 1 scored of 0..5: 0 (1.075).
// t=10: 7 forced: k - 1 = 1 scored of 0..6: 1 (.955 over 3 .801).
// t=11: nothing forced, 2 scored: 1 (.915), 3 (.756).
TEST(OmniKv, ForceIncludedPositionsCountInsideK) {
  const SimInput in = window_input();
  auto p = policy("omnikv:filters=1,selector=uniform,window=4", 2, in.shape);
  const RunData r = run_one(in, *p);
  EXPECT_EQ(prompt_kept(r, in, 0), (std::vector<int>{0, 5, 6, 7}));
  EXPECT_EQ(prompt_kept(r, in, 1), (std::vector<int>{0, 6, 7}));
  EXPECT_EQ(prompt_kept(r, in, 2), (std::vector<int>{1, 7}));
  EXPECT_EQ(prompt_kept(r, in, 3), (std::vector<int>{1, 3}));
  // A budget covering the prompt keeps all of it at every step.
  auto all = policy("omnikv:filters=1,selector=exp,window=4", 8, in.shape);
  const RunData ra = run_one(in, *all);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(prompt_kept(ra, in, s), range(0, 8)) << s;
}

// P=4, H=2, window=2, k=2, step 0 (t = 4): position 3 is forced, 1 key scored of 0..2 over
// queries 3 (evidence) and 4. Query 3: head 0 .15 at 0 and .85 on itself (forced), head 1 .4 at
// 1, .3 at 2 and 3. Query 4: .1 on each prompt key, .6 on itself, both heads. Softmax over the
// scored keys 0..2 (the reference): head 0 of query 3 puts all its mass on 0 -> 0 (1.333) over 1
// (.905). Over all prompt keys, query 3's .85 on the forced key would dilute head 0 to .15 and
// select 1 (.65) over 0 (.40).
TEST(OmniKv, WindowQueriesSoftmaxOverTheScoredKeysOnly) {
  const ModelShape shape = shape_of(4, 2, 1);
  SimInput in = random_input(shape, 4, 1, 4, 66);
  const int P = 4, T = in.total_len, W = in.prefill.window;
  ASSERT_EQ(W, 4);
  auto ev_row = [&](int h, int pos) { return in.prefill.window_rows.data() + (((size_t)1 * 2 + h) * W + pos - (P - W)) * P; };
  put(ev_row(0, 3), P, {.15f, 0.0f, 0.0f, .85f});
  put(ev_row(1, 3), P, {0.0f, .4f, .3f, .3f});
  for (int h = 0; h < 2; ++h) put(in.rows.data() + ((size_t)1 * 2 + h) * T, T, {.1f, .1f, .1f, .1f, .6f});
  for (const char* sel : {"uniform", "exp"}) {
    auto p = policy(std::string("omnikv:filters=1,selector=") + sel + ",window=2", 2, shape);
    EXPECT_EQ(kept_at(run_one(in, *p), in, 0, 3, 0), (std::vector<int>{0, 3, 4})) << sel;
  }
}

// With window=1 the window is the current query alone: uniform and exp reduce to
// softmax_before_last.
TEST(OmniKv, WindowOfOneIsSoftmaxBeforeLast) {
  const ModelShape shape = shape_of(6, 4, 2);
  const SimInput in = random_input(shape, 30, 6, 4, 65);
  auto ref = policy("omnikv:filters=1,4,selector=softmax_before_last", 5, shape);
  const RunData r = run_one(in, *ref);
  for (const char* sel : {"uniform", "exp"}) {
    auto p = policy(std::string("omnikv:filters=1,4,window=1,selector=") + sel, 5, shape);
    EXPECT_EQ(run_one(in, *p).kept, r.kept) << sel;
  }
}

// A sparse layer marks each held prompt entry by the selection at its position, whether the
// head holds the whole prompt in order (the selection copied as it is) or some of it (entry by
// entry): L=4, H=2, Hkv=2, P=10, filter layer 1, wait 1, k=3; layer 3 is sparse. Head 1 of
// layer 3 lost positions 0 and 4 before the step.
TEST(OmniKv, SparseLayersMarkHeldPromptEntriesByTheirPositions) {
  const ModelShape shape = shape_of(4, 2, 2);
  const int P = 10;
  auto p = policy("omnikv:filters=1,wait=1", 3, shape);
  PolicyContext ctx;
  ctx.shape = shape;
  ctx.prompt_len = P;
  p->begin(ctx);
  PositionSlots kv(4, 2);
  kv.fill_prompt(P);
  std::vector<uint8_t> keep(P, 1);
  keep[0] = keep[4] = 0;
  kv.evict(3, 1, keep);
  for (int l = 0; l < 4; ++l)
    for (int g = 0; g < 2; ++g) kv.append(l, g, P);
  ASSERT_EQ(p->key_ranking(1).k, 3);
  const std::vector<int32_t> chosen{8, 2, 5};
  p->on_key_ranking(1, P, chosen);
  p->before_attention(3, P, kv);
  for (int g = 0; g < 2; ++g) {
    const auto held = kv.held(3, g);
    const auto act = kv.active(3, g);
    std::vector<int> attended;
    for (size_t i = 0; i < held.size(); ++i)
      if (act[i]) attended.push_back(held[i]);
    EXPECT_EQ(attended, (std::vector<int>{2, 5, 8, 10})) << "KV head " << g;
  }
  p->before_attention(2, P, kv);  // a dense layer stays as it is
  for (int g = 0; g < 2; ++g)
    for (uint8_t a : kv.active(2, g)) EXPECT_EQ(a, 1);
}

// The default selector is last, whatever window says; the windowed selectors differ from it.
TEST(OmniKv, DefaultSelectorIsLast) {
  const ModelShape shape = shape_of(6, 4, 2);
  const SimInput in = random_input(shape, 40, 8, 16, 66);
  auto def = policy("omnikv:filters=1,4", 6, shape);
  const RunData r = run_one(in, *def);
  for (const char* spec : {"omnikv:filters=1,4,selector=last", "omnikv:filters=1,4,window=3"}) {
    auto p = policy(spec, 6, shape);
    EXPECT_EQ(run_one(in, *p).kept, r.kept) << spec;
  }
  auto u = policy("omnikv:filters=1,4,selector=uniform,window=8", 6, shape);
  EXPECT_NE(run_one(in, *u).kept, r.kept);
}

// Prompt rows the window needs must be in the evidence (W = 4 holds positions 4..7); decode
// positions must all have been seen.
TEST(OmniKv, WindowedSelectorsReportMissingEvidence) {
  SimInput in = window_input();
  EXPECT_EQ(run_error(in, "omnikv:filters=1,selector=uniform,window=5", 4), "");  // needs 4..7
  EXPECT_EQ(run_error(in, "omnikv:filters=1,selector=exp,window=6", 4),
            "--policy omnikv: selector exp with window=6 needs filter layer 1's attention row of "
            "the query at position 3, but the prefill evidence holds the rows of positions 4..7 "
            "only (4 rows; window=6 needs 5)");
  EXPECT_EQ(run_error(in, "omnikv:filters=1,selector=softmax_before_last,window=64", 4), "");

  SimInput no_rows = in;
  no_rows.prefill.window_rows.clear();
  EXPECT_NE(run_error(no_rows, "omnikv:filters=1,selector=uniform,window=3", 4)
                .find("position 6 (the prompt's window rows are absent: the trace holds no prefill"),
            std::string::npos);
  EXPECT_EQ(run_error(no_rows, "omnikv:filters=1,selector=uniform,window=1", 4), "");  // none needed
  EXPECT_EQ(run_error(no_rows, "omnikv:filters=1", 4), "");

  SimInput gap = in;  // decode steps at 8 and 10 only: 9 is missing from 10's window
  gap.n_steps = 2;
  gap.q_pos = {8, 10};
  EXPECT_EQ(run_error(gap, "omnikv:filters=1,selector=uniform,window=3", 4),
            "--policy omnikv: selector uniform with window=3 needs filter layer 1's attention row "
            "of the query at position 9, a decode position the driver never delivered");
  EXPECT_EQ(run_error(gap, "omnikv:filters=1,selector=uniform,window=1", 4), "");
}

TEST(OmniKv, SelectorAndWindowParameterErrors) {
  const ModelShape shape = shape_of(4, 2, 1);
  EXPECT_EQ(error_of("omnikv:selector=max", shape),
            "--policy omnikv: selector must be last, softmax_before_last, uniform or exp (got 'max')");
  EXPECT_EQ(error_of("omnikv:selector=uniform,window=0", shape), "--policy omnikv: window must be >= 1 (got 0)");
  EXPECT_EQ(error_of("omnikv:window=-2", shape), "--policy omnikv: window must be >= 1 (got -2)");
  EXPECT_NE(error_of("omnikv:window=x", shape), "");
  EXPECT_NE(error_of("omnikv:windows=3", shape).find("unknown parameter 'windows'"), std::string::npos);
  for (const char* sel : {"last", "softmax_before_last", "uniform", "exp"})
    EXPECT_EQ(error_of(std::string("omnikv:selector=") + sel, shape), "") << sel;
}

TEST(OmniKv, ParamsJsonReportsSelectorAndWindow) {
  const ModelShape shape = shape_of(4, 2, 1);
  EXPECT_EQ(policy("omnikv:filters=1", 3, shape)->params_json(),
            "{\"filters\":[1],\"wait\":1,\"selector\":\"last\",\"window\":16,\"k\":0}");
  const SimInput in = window_input();
  auto p = policy("omnikv:filters=1,selector=exp,window=3", 4, shape);
  EXPECT_EQ(run_one(in, *p).params_json,
            "{\"filters\":[1],\"wait\":1,\"selector\":\"exp\",\"window\":3,\"k\":4}");
  EXPECT_NE(policy("omnikv:selector=softmax_before_last", 3, shape)->params_json().find(
                "\"selector\":\"softmax_before_last\""),
            std::string::npos);
}
