// diff_decode_rows: a trace against itself (nothing apart), against a copy with one probability
// moved (found at its step, layer, head and key, and only that row outside the tolerance), against
// a trace whose tokens part after a few steps (compared up to there), against a damaged one (the
// reader's error), and against traces of another shape or prompt length (not compared, and why).
#include "analysis/trace_row_diff.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "analysis/trace.h"
#include "inference/errors.h"
#include "tests/analysis/decode_trace_fixture.h"
#include "tests/analysis/trace_test_util.h"

namespace kvs {
namespace {

// A scratch folder and traces written into it.
class TraceRowDiff : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  // t's rows written again as a trace at `name`, with `edit` applied to the rows [steps, L, H, T]
  // and the token ids (T, all 3 as the fixture writes them) first.
  std::string rewrite(const test::DecodeTrace& t, const std::string& name,
                      const std::function<void(std::vector<float>&, std::vector<int32_t>&)>& edit) const {
    const int L = t.shape.n_layers, H = t.shape.n_heads, T = t.total_len();
    std::vector<float> rows = t.rows;
    std::vector<int32_t> ids(T, 3);
    edit(rows, ids);
    TraceMeta meta;
    meta.model = "random";
    meta.shape = t.shape;
    meta.vocab_size = 32;
    meta.prompt_len = t.prompt_len;
    TraceWriter writer(file(name), meta, t.n_steps);
    for (int s = 0; s < t.n_steps; ++s) {
      const int q = t.q_pos[s], len = q + 1;
      std::vector<float> step(static_cast<std::size_t>(L) * H * len);  // [L, H, len]
      for (int lh = 0; lh < L * H; ++lh)
        for (int j = 0; j < len; ++j)
          step[static_cast<std::size_t>(lh) * len + j] = rows[(static_cast<std::size_t>(s) * L * H + lh) * T + j];
      writer.write_decode_step(s, q, step, std::vector<float>(t.lse.begin() + static_cast<long>(s) * L * H,
                                                               t.lse.begin() + static_cast<long>(s + 1) * L * H));
    }
    meta.n_steps = t.n_steps;
    writer.commit(meta, ids, std::vector<std::string>(T, "x"));
    return file(name);
  }

  testing::TempDir dir_;
};

TEST_F(TraceRowDiff, ATraceAgainstItselfIsNothingApart) {
  const test::DecodeTrace t = test::write_decode_trace(file("a.h5"), 2, 4, 2, 5, 6, 1);
  const TraceReader r(t.path);
  const RowDiff d = diff_decode_rows(r, r);
  EXPECT_TRUE(d.why_not.empty());
  EXPECT_EQ(d.tokens_part, -1);
  EXPECT_EQ(d.steps(), 6);
  EXPECT_EQ(d.rows, 6 * 2 * 4);
  EXPECT_EQ(d.rows_within, d.rows);
  EXPECT_EQ(d.max, 0.0f);
  EXPECT_EQ(d.step_max, std::vector<float>(6, 0.0f));
}

TEST_F(TraceRowDiff, OneMovedProbabilityIsFoundWhereItIs) {
  const test::DecodeTrace t = test::write_decode_trace(file("a.h5"), 2, 4, 2, 5, 6, 2);
  const int L = 2, H = 4, T = t.total_len(), s = 3, l = 1, h = 2, key = 4;
  const std::size_t at = ((static_cast<std::size_t>(s) * L + l) * H + h) * T + key;
  // Within the 1e-2 a row's sum may stray from 1 (a trace reader refuses more), above the 1e-3 compared.
  const float moved = t.rows[at] > 0.5f ? -5e-3f : 5e-3f;
  const std::string b =
      rewrite(t, "b.h5", [&](std::vector<float>& rows, std::vector<int32_t>&) { rows[at] += moved; });
  const RowDiff d = diff_decode_rows(TraceReader(t.path), TraceReader(b), 1e-3f);
  EXPECT_EQ(d.steps(), 6);
  EXPECT_NEAR(d.max, 5e-3f, 1e-6f);
  EXPECT_EQ(d.worst_step, s);
  EXPECT_EQ(d.worst_layer, l);
  EXPECT_EQ(d.worst_head, h);
  EXPECT_EQ(d.worst_key, key);
  EXPECT_EQ(d.rows - d.rows_within, 1);
  ASSERT_EQ(d.step_max.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(d.step_max[i] > 0.0f, i == s) << "step " << i;
}

// Tokens part at position 8 (prompt 5): steps whose queries are 5, 6, 7 compare; query 8 is a
// different token's.
TEST_F(TraceRowDiff, RowsAreComparedUntilTheTokensPart) {
  const test::DecodeTrace t = test::write_decode_trace(file("a.h5"), 1, 2, 1, 5, 6, 3);
  const std::string b = rewrite(t, "b.h5", [](std::vector<float>&, std::vector<int32_t>& ids) { ids[8] = 4; });
  const RowDiff d = diff_decode_rows(TraceReader(t.path), TraceReader(b));
  EXPECT_TRUE(d.why_not.empty());
  EXPECT_EQ(d.tokens_part, 8);
  EXPECT_EQ(d.steps(), 3);
  EXPECT_EQ(d.rows, 3 * 2);
}

// A damaged step is TraceReader's one-line error, naming the file, step and where.
TEST_F(TraceRowDiff, ADamagedStepThrowsWhereItIs) {
  const test::DecodeTrace t = test::write_decode_trace(file("a.h5"), 1, 2, 1, 5, 4, 7);
  const std::string b = rewrite(t, "b.h5", [&](std::vector<float>& rows, std::vector<int32_t>&) {
    rows[(2 * 2 + 1) * static_cast<std::size_t>(t.total_len()) + 3] = 5.0f;  // step 2, head 1, key 3
  });
  try {
    diff_decode_rows(TraceReader(t.path), TraceReader(b));
    FAIL() << "a value of 5 was read as a probability";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              b + ": /attention/decode step 2 layer 0 head 1 key 3 holds 5.000000, not a probability");
  }
}

TEST_F(TraceRowDiff, AnotherShapeOrPromptLengthIsNotCompared) {
  const test::DecodeTrace t = test::write_decode_trace(file("a.h5"), 2, 4, 2, 5, 3, 4);
  const test::DecodeTrace heads = test::write_decode_trace(file("b.h5"), 2, 2, 2, 5, 3, 5);
  const test::DecodeTrace prompt = test::write_decode_trace(file("c.h5"), 2, 4, 2, 6, 3, 6);
  const RowDiff x = diff_decode_rows(TraceReader(t.path), TraceReader(heads.path));
  EXPECT_EQ(x.why_not, "the traces' models differ in shape (2 layers x 4 heads against 2 x 2)");
  EXPECT_EQ(x.steps(), 0);
  const RowDiff y = diff_decode_rows(TraceReader(t.path), TraceReader(prompt.path));
  EXPECT_EQ(y.why_not, "the prompts differ in length (5 and 6 tokens)");
}

}  // namespace
}  // namespace kvs
