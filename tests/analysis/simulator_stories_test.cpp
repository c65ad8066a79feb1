// The simulator over a real recorded trace (stories260K): StreamingLLM's exact kept sets,
// full recall for every policy whose budget covers the context, and a one-line error for a
// policy whose data the trace lacks.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "analysis/simulator.h"
#include "analysis/trace.h"
#include "app/cli/record.h"
#include "inference/errors.h"

using namespace kvs;
namespace fs = std::filesystem;

namespace {

class StoriesTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = fs::path(KVSCOPE_SHARED_DIR) / "models" / "stories260K";
    if (!fs::exists(dir / "stories260K.bin")) return;
    path_ = (fs::temp_directory_path() / ("kvs_sim_stories_" + std::to_string(::getpid()) + ".h5")).string();
    RecordRequest req;
    req.model_path = (dir / "stories260K.bin").string();
    req.tokenizer_path = (dir / "tok512.bin").string();
    req.prompt = "Once upon a time";
    req.steps = 48;
    req.out_path = path_;
    record_trace(req);
  }
  static void TearDownTestSuite() {
    if (!path_.empty()) fs::remove(path_);
  }
  void SetUp() override {
    if (path_.empty()) GTEST_SKIP() << "stories260K model files absent";
  }
  static std::string path_;
};
std::string StoriesTrace::path_;

RunData run(const TraceReader& tr, const std::string& spec, int budget) {
  auto p = make_policy(parse_policy_spec(spec, budget), tr.meta().shape);
  return simulate(tr, *p, SimulateOptions{});
}

}  // namespace

TEST_F(StoriesTrace, StreamingLlmKeepsExactlySinksAndRecentWindow) {
  TraceReader tr(path_);
  const TraceMeta& m = tr.meta();
  ASSERT_GT(m.total_len(), 40);
  const RunData r = run(tr, "streamingllm", 36);
  const std::vector<int32_t> q = tr.decode_query_pos();
  const int L = m.shape.n_layers, Hkv = m.shape.n_kv_heads, T = m.total_len();
  for (int s = 0; s < m.n_steps; ++s)
    for (int l = 0; l < L; ++l)
      for (int g = 0; g < Hkv; ++g) {
        const uint8_t* k = r.kept.data() + (((size_t)s * L + l) * Hkv + g) * T;
        for (int t = 0; t < T; ++t) {
          const bool expect = t <= q[s] && (t < 4 || t >= q[s] - 32);
          ASSERT_EQ(k[t], expect ? 1 : 0) << "step " << s << " layer " << l << " pos " << t;
        }
      }
}

TEST_F(StoriesTrace, EveryPolicyHasFullRecallWhenTheBudgetCoversTheContext) {
  TraceReader tr(path_);
  const int T = tr.meta().total_len();
  for (const std::string& name : policy_names()) {
    if (name == "kvzip") continue;  // needs the repeat pass (below)
    const RunData r = run(tr, name == "omnikv" ? "omnikv:filters=1" : name, T);
    for (const NamedArray& m : r.metrics) {
      if (m.name == "recall") {
        for (float v : m.data) ASSERT_NEAR(v, 1.0f, 1e-4) << name;
      }
    }
  }
}

TEST_F(StoriesTrace, KvzipWithoutRepeatScoresIsAOneLineError) {
  TraceReader tr(path_);
  try {
    run(tr, "kvzip", 8);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "kvzip: needs the repeat-pass scores (run with --model)");
  }
}
