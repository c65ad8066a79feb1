// `kvscope record --capture-budget-mb`: over the budget the trace keeps the prefill reductions
// (column sums, observation window) instead of the full map, and says so in capture_note.
#include <gtest/gtest.h>

#include "analysis/trace.h"
#include "tests/reliability/process_util.h"

namespace kvs {
namespace {

using namespace kvs::rel;

std::vector<std::string> record_args(const std::string& out, const std::string& budget_mb) {
  return {"record", "--model", kModel, "--tokenizer", kTokenizer, "--prompt",
          "Once upon a time there was a little girl who loved to read books about dragons",
          "--steps", "4", "--out", out, "--quiet", "--threads", "1", "--capture-budget-mb", budget_mb};
}

TEST(CaptureBudget, TinyBudgetKeepsReductionsAndSaysSo) {
  if (!have_model()) GTEST_SKIP() << "stories260K not found: " << kModel;
  ScratchDir dir("budget");
  const std::string out = dir.path + "/small.h5";
  ASSERT_EQ(run_kvscope(record_args(out, "0")), 0);
  TraceReader r(out);
  const TraceMeta& m = r.meta();
  const int L = m.shape.n_layers, H = m.shape.n_heads, P = m.prompt_len;
  EXPECT_FALSE(m.has_prefill_map);
  EXPECT_TRUE(r.read_prefill_map(0, 0).empty());
  const PrefillEvidence ev = r.read_prefill();
  ASSERT_EQ(ev.colsum.size(), (size_t)L * H * P);
  EXPECT_FALSE(ev.window_rows.empty());
  EXPECT_EQ(ev.window_rows.size() % ((size_t)L * H * P), 0u);
  // Each column sum is the sum over the P prompt queries of softmax rows: they total P per head.
  double total = 0.0;
  for (int p = 0; p < P; ++p) total += ev.colsum[p];
  EXPECT_NEAR(total, P, 1e-3 * P);
  EXPECT_FALSE(m.capture_note.empty());
  ASSERT_TRUE(r.has_attr("/", "capture_note"));
  EXPECT_EQ(r.read_string_attr("/", "capture_note"), m.capture_note);
  EXPECT_NE(m.capture_note.find("capture budget"), std::string::npos) << m.capture_note;

  // The default budget keeps the full map, whose column sums match the reduced trace's.
  const std::string full = dir.path + "/full.h5";
  ASSERT_EQ(run_kvscope(record_args(full, "256")), 0);
  TraceReader rf(full);
  EXPECT_TRUE(rf.meta().has_prefill_map);
  const std::vector<float> map = rf.read_prefill_map(0, 0);  // [P, P]
  ASSERT_EQ(map.size(), (size_t)P * P);
  for (int k = 0; k < P; ++k) {
    double col = 0.0;
    for (int q = 0; q < P; ++q) col += map[(size_t)q * P + k];
    EXPECT_NEAR(col, ev.colsum[k], 1e-3 * (1.0 + col)) << "key " << k;  // the map is stored as float16
  }
}

}  // namespace
}  // namespace kvs
