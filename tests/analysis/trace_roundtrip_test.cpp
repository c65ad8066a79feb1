// TraceWriter -> TraceReader round trips: float32 bit-exact, float16 within half precision,
// early commits with fewer steps, prefill evidence, arrays and attributes.
#include <gtest/gtest.h>

#include <cstring>

#include "analysis/trace.h"
#include "analysis/trace_snapshot.h"
#include "inference/errors.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

PrefillEvidence random_evidence(std::mt19937& rng, const TraceMeta& m, int W) {
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = m.prompt_len;
  ev.window = W;
  std::uniform_real_distribution<float> u(0.0f, 3.0f);
  const size_t L = m.shape.n_layers, H = m.shape.n_heads, P = m.prompt_len;
  for (size_t i = 0; i < L * H * P; ++i) ev.colsum.push_back(u(rng));
  for (size_t i = 0; i < L * H * W * P; ++i) ev.window_rows.push_back(u(rng) / 3.0f);
  for (size_t i = 0; i < L * H * W; ++i) ev.window_lse.push_back(u(rng));
  return ev;
}

struct Written {
  std::vector<std::vector<float>> rows;  // per step, [L, H, q + 1]
  std::vector<std::vector<float>> lse;   // per step, [L, H]
};

// Writes `steps` decode steps at q = P + s.
Written write_steps(TraceWriter& w, std::mt19937& rng, const TraceMeta& m, int steps) {
  Written out;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> lse;
    out.rows.push_back(testing::decode_rows(rng, m, m.prompt_len + s, lse));
    out.lse.push_back(lse);
    w.write_decode_step(s, m.prompt_len + s, out.rows.back(), lse);
  }
  return out;
}

// rows read back [L, H, T] against the written [L, H, q + 1] (zeros past q).
void expect_rows(const std::vector<float>& got, const std::vector<float>& want, int LH, int T, int q, float tol) {
  ASSERT_EQ(got.size(), (size_t)LH * T);
  for (int i = 0; i < LH; ++i)
    for (int k = 0; k < T; ++k) {
      const float g = got[(size_t)i * T + k];
      if (k > q) {
        ASSERT_EQ(g, 0.0f) << "row " << i << " key " << k;
      } else if (tol == 0.0f) {
        const float w = want[(size_t)i * (q + 1) + k];
        ASSERT_EQ(std::memcmp(&g, &w, 4), 0) << "row " << i << " key " << k;
      } else {
        const float w = want[(size_t)i * (q + 1) + k];
        ASSERT_NEAR(g, w, tol * std::fabs(w) + 6e-8f) << "row " << i << " key " << k;
      }
    }
}

TEST(TraceRoundTrip, Float32IsBitExactAndMetaSurvives) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  std::mt19937 rng(1);
  TraceMeta m = testing::small_meta();
  m.tokenizer_path = "/models/tok.bin";
  m.temperature = 0.7f;
  m.top_p = 0.9f;
  m.seed = 0x8000000000000005ull;
  m.device = "cpu";
  m.created = "2026-01-02T03:04:05Z";
  const int steps = 4, P = m.prompt_len, L = m.shape.n_layers, H = m.shape.n_heads;
  const PrefillEvidence ev = random_evidence(rng, m, 3);
  std::vector<float> map;  // [L, H, P, P]
  for (int i = 0; i < L * H * P * P; ++i) map.push_back(std::uniform_real_distribution<float>(0, 1)(rng));
  Written data;
  {
    TraceWriter w(path, m, steps);
    EXPECT_NE(w.temp_path().find(path + ".tmp-"), std::string::npos);
    w.write_prefill(ev, map);
    data = write_steps(w, rng, m, steps);
    w.write_array("/heads/alpha", {"alpha", {2, 2}, {0.1f, 0.2f, 0.3f, 0.4f}}, {{"source", "profiled"}});
    EXPECT_FALSE(std::filesystem::exists(path)) << "final name appears only at commit";
    m.n_steps = steps;
    w.commit(m, testing::token_ids(P + steps), testing::token_texts(P + steps));
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});

  TraceReader r(path);
  const TraceMeta& g = r.meta();
  EXPECT_EQ(g.schema_version, kTraceSchemaVersion);
  EXPECT_EQ(g.writer_version, "test");
  EXPECT_EQ(g.created, "2026-01-02T03:04:05Z");
  EXPECT_EQ(g.model, "synthetic");
  EXPECT_EQ(g.model_path, "/models/synthetic.bin");
  EXPECT_EQ(g.tokenizer_path, "/models/tok.bin");
  EXPECT_EQ(g.arch, "llama");
  EXPECT_EQ(g.device, "cpu");
  EXPECT_EQ(g.shape.n_layers, 2);
  EXPECT_EQ(g.shape.n_heads, 4);
  EXPECT_EQ(g.shape.n_kv_heads, 2);
  EXPECT_EQ(g.shape.head_dim, 8);
  EXPECT_EQ(g.vocab_size, 32);
  EXPECT_EQ(g.prompt_len, P);
  EXPECT_EQ(g.n_steps, steps);
  EXPECT_EQ(g.prompt, "Once upon a time");
  EXPECT_EQ(g.temperature, 0.7f);
  EXPECT_EQ(g.top_p, 0.9f);
  EXPECT_EQ(g.seed, 0x8000000000000005ull);
  EXPECT_EQ(g.decode_dtype, "float32");
  EXPECT_TRUE(g.has_prefill_map);
  EXPECT_EQ(g.capture_note, "");
  EXPECT_EQ(r.token_ids(), testing::token_ids(P + steps));
  EXPECT_EQ(r.token_texts(), testing::token_texts(P + steps));
  EXPECT_EQ(r.decode_query_pos(), (std::vector<int32_t>{5, 6, 7, 8}));

  std::vector<float> rows, lse;
  for (int s = 0; s < steps; ++s) {
    r.read_decode_step(s, rows, lse);
    expect_rows(rows, data.rows[s], L * H, P + steps, P + s, 0.0f);
    EXPECT_EQ(lse, data.lse[s]);
  }
  EXPECT_THROW(r.read_decode_step(steps, rows, lse), std::out_of_range);

  const PrefillEvidence back = r.read_prefill();
  EXPECT_EQ(back.window, 3);
  EXPECT_EQ(back.prompt_len, P);
  EXPECT_EQ(back.colsum, ev.colsum);
  EXPECT_EQ(back.window_rows, ev.window_rows);
  EXPECT_EQ(back.window_lse, ev.window_lse);
  EXPECT_TRUE(back.key_scores.empty());
  const std::vector<float> map11 = r.read_prefill_map(1, 1);
  ASSERT_EQ(map11.size(), (size_t)P * P);
  for (int i = 0; i < P * P; ++i) EXPECT_NEAR(map11[i], map[(1 * H + 1) * P * P + i], 1e-3f * map11[i] + 6e-8f);

  ASSERT_TRUE(r.has_array("/heads/alpha"));
  EXPECT_FALSE(r.has_array("/heads/beta"));
  EXPECT_FALSE(r.has_array("/nothing/here"));
  const NamedArray alpha = r.read_array("/heads/alpha");
  EXPECT_EQ(alpha.name, "alpha");
  EXPECT_EQ(alpha.dims, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(alpha.data, (std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}));
  EXPECT_EQ(r.read_string_attr("/heads/alpha", "source"), "profiled");
  EXPECT_TRUE(r.has_attr("/heads/alpha", "source"));
  EXPECT_FALSE(r.has_attr("/heads/alpha", "nope"));
  EXPECT_THROW(r.read_string_attr("/heads/alpha", "nope"), InputError);
  EXPECT_TRUE(r.run_names().empty());
}

TEST(TraceRoundTrip, Float16DecodeWithinHalfPrecision) {
  TempDir dir;
  const std::string path = dir.file("h.h5");
  std::mt19937 rng(2);
  TraceMeta m = testing::small_meta(3, 2, 1, 7);
  m.decode_dtype = "float16";
  const int steps = 3, P = m.prompt_len;
  Written data;
  {
    TraceWriter w(path, m, steps);
    w.write_prefill(random_evidence(rng, m, 7), {});
    data = write_steps(w, rng, m, steps);
    m.n_steps = steps;
    w.commit(m, testing::token_ids(P + steps), testing::token_texts(P + steps));
  }
  TraceReader r(path);
  EXPECT_EQ(r.meta().decode_dtype, "float16");
  EXPECT_FALSE(r.meta().has_prefill_map);
  EXPECT_TRUE(r.read_prefill_map(0, 0).empty());
  std::vector<float> rows, lse;
  for (int s = 0; s < steps; ++s) {
    r.read_decode_step(s, rows, lse);
    expect_rows(rows, data.rows[s], 6, P + steps, P + s, 1.0f / 1024.0f);
    EXPECT_EQ(lse, data.lse[s]);  // lse stays float32
  }
}

TEST(TraceRoundTrip, EarlyCommitShrinksToTheStepsWritten) {
  TempDir dir;
  const std::string path = dir.file("e.h5");
  std::mt19937 rng(3);
  TraceMeta m = testing::small_meta();
  const int P = m.prompt_len;
  Written data;
  {
    TraceWriter w(path, m, 10);
    w.write_prefill(random_evidence(rng, m, 2), {});
    data = write_steps(w, rng, m, 3);
    m.n_steps = 10;
    EXPECT_THROW(w.commit(m, testing::token_ids(P + 10), testing::token_texts(P + 10)), std::invalid_argument);
    m.n_steps = 3;
    w.commit(m, testing::token_ids(P + 3), testing::token_texts(P + 3));
  }
  TraceReader r(path);
  EXPECT_EQ(r.meta().n_steps, 3);
  EXPECT_EQ(r.meta().total_len(), P + 3);
  EXPECT_EQ(r.token_ids().size(), (size_t)P + 3);
  std::vector<float> rows, lse;
  r.read_decode_step(2, rows, lse);
  expect_rows(rows, data.rows[2], 8, P + 3, P + 2, 0.0f);
}

TEST(TraceRoundTrip, ZeroStepsIsAValidTrace) {
  TempDir dir;
  const std::string path = dir.file("z.h5");
  std::mt19937 rng(4);
  TraceMeta m = testing::small_meta();
  {
    TraceWriter w(path, m, 0);
    w.write_prefill(random_evidence(rng, m, 5), {});
    w.commit(m, testing::token_ids(m.prompt_len), testing::token_texts(m.prompt_len));
  }
  TraceReader r(path);
  EXPECT_EQ(r.meta().n_steps, 0);
  EXPECT_TRUE(r.decode_query_pos().empty());
  EXPECT_EQ(r.read_prefill().window, 5);
}

// The generated text the app shows is the token texts joined: a newline token is a newline, and
// the "\x0A" / "\x09" / "\x0D" that older traces stored for SentencePiece's control-character
// byte tokens read as the character too; a byte of a split character stays "\xF0".
TEST(TraceRoundTrip, GeneratedTextJoinsTokenTextsAndReadsOldControlEscapes) {
  TempDir dir;
  const std::string path = dir.file("n.h5");
  std::mt19937 rng(5);
  TraceMeta m = testing::small_meta();
  const int P = m.prompt_len;
  std::vector<std::string> texts = testing::token_texts(P);
  for (const char* t : {" high.", "\\x0A", "Lily", "\\x09", "\\xF0", "\n", "\\x0D"}) texts.push_back(t);
  {
    TraceWriter w(path, m, 7);
    w.write_prefill(random_evidence(rng, m, 2), {});
    write_steps(w, rng, m, 7);
    m.n_steps = 7;
    w.commit(m, testing::token_ids(P + 7), texts);
  }
  const auto snap = load_trace_snapshot(TraceReader(path));
  EXPECT_EQ(snap->token_texts[P + 1], "\\x0A");
  EXPECT_EQ(snap->token_texts[P + 5], "\n");
  EXPECT_EQ(snap->generated_text, " high.\nLily\t\\xF0\n\r");
}

TEST(TraceRoundTrip, OutOfOrderStepsAndBadSizesAreRejected) {
  TempDir dir;
  std::mt19937 rng(5);
  TraceMeta m = testing::small_meta();
  TraceWriter w(dir.file("o.h5"), m, 4);
  std::vector<float> lse;
  const auto rows = testing::decode_rows(rng, m, m.prompt_len + 1, lse);
  EXPECT_THROW(w.write_decode_step(1, m.prompt_len + 1, rows, lse), std::logic_error);
  EXPECT_THROW(w.write_decode_step(0, m.prompt_len + 5, rows, lse), std::invalid_argument);
  EXPECT_THROW(w.write_array("/tokens/ids", {"ids", {1}, {1.0f}}), std::invalid_argument);
  EXPECT_THROW(w.write_array("/heads/x", {"x", {3}, {1.0f}}), std::invalid_argument);
}

}  // namespace
}  // namespace kvs
